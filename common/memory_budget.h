// GPU memory as a scheduled resource: a capacity that holders reserve from before they allocate,
// waiting their turn when it is taken. The verifier's jobs reserve their measured needs from it
// (verify/device_memory.h); the trainer's module validators reserve their cap from the verifier's
// budget while they validate, so the two share one device's memory (tasks/validation.h).
//
// Thread safety: DeviceMemoryBudget is thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace kz {

std::string gib(int64_t bytes);  // "12.3 GiB"

class DeviceMemoryBudget {
public:
    explicit DeviceMemoryBudget(int64_t capacity_bytes);
    DeviceMemoryBudget(const DeviceMemoryBudget&) = delete;
    DeviceMemoryBudget& operator=(const DeviceMemoryBudget&) = delete;

    // Admitted memory, returned when destroyed (or on release()). Movable, not copyable.
    class Reservation {
    public:
        Reservation() = default;
        Reservation(Reservation&& o) noexcept;
        Reservation& operator=(Reservation&& o) noexcept;
        ~Reservation() { release(); }
        void release();
        int64_t bytes() const { return bytes_; }
        bool admitted() const { return budget_ != nullptr; }
        // Other jobs' memory admitted beside this one when it was admitted.
        int64_t beside() const { return beside_; }

    private:
        friend class DeviceMemoryBudget;
        DeviceMemoryBudget* budget_ = nullptr;
        int64_t bytes_ = 0, beside_ = 0;
    };

    // Blocks until `bytes` are admitted (in order of arrival, each once the admitted jobs leave room
    // for it). Throws std::length_error when `bytes` exceed the whole capacity (the job cannot run even
    // alone). Returns a reservation that is not admitted() when `stop` is set while waiting (wake()
    // makes waiters look).
    Reservation acquire(int64_t bytes, const std::atomic<bool>& stop);
    // The whole capacity: the job runs with nothing else of this verifier on the device.
    Reservation acquire_all(const std::atomic<bool>& stop) { return acquire(capacity_, stop); }
    void wake();

    int64_t capacity() const { return capacity_; }
    int64_t in_use() const;
    int64_t peak_in_use() const;  // the most admitted at once so far
    int waiting() const;

private:
    void give_back(int64_t bytes);
    const int64_t capacity_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<uint64_t> queue_;  // tickets of waiting jobs, in order of arrival
    uint64_t next_ticket_ = 0;
    int64_t in_use_ = 0, peak_ = 0;
};

}  // namespace kz
