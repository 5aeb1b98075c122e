#include "common/memory_budget.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "common/host.h"

namespace kz {

std::string gib(int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
    return buf;
}

DeviceMemoryBudget::DeviceMemoryBudget(int64_t capacity_bytes) : capacity_(std::max<int64_t>(0, capacity_bytes)) {}

DeviceMemoryBudget::Reservation::Reservation(Reservation&& o) noexcept
    : budget_(o.budget_), bytes_(o.bytes_), beside_(o.beside_) {
    o.budget_ = nullptr;
}

DeviceMemoryBudget::Reservation& DeviceMemoryBudget::Reservation::operator=(Reservation&& o) noexcept {
    if (this != &o) {
        release();
        budget_ = o.budget_;
        bytes_ = o.bytes_;
        beside_ = o.beside_;
        o.budget_ = nullptr;
    }
    return *this;
}

void DeviceMemoryBudget::Reservation::release() {
    if (budget_) budget_->give_back(bytes_);
    budget_ = nullptr;
}

DeviceMemoryBudget::Reservation DeviceMemoryBudget::acquire(int64_t bytes, const std::atomic<bool>& stop) {
    bytes = std::max<int64_t>(0, bytes);
    if (bytes > capacity_)
        throw std::length_error("needs " + gib(bytes) + " of device memory; the device offers " + gib(capacity_) +
                                " to the verifier's jobs");
    std::unique_lock lock(mu_);
    const uint64_t ticket = next_ticket_++;
    queue_.push_back(ticket);
    cv_.wait(lock, [&] { return stop.load() || (queue_.front() == ticket && in_use_ + bytes <= capacity_); });
    queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
    Reservation r;
    if (stop.load()) {
        cv_.notify_all();
        return r;
    }
    r.budget_ = this;
    r.bytes_ = bytes;
    r.beside_ = in_use_;
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    cv_.notify_all();  // the next in line may fit too
    return r;
}

void DeviceMemoryBudget::give_back(int64_t bytes) {
    {
        std::lock_guard lock(mu_);
        in_use_ -= bytes;
    }
    cv_.notify_all();
}

void DeviceMemoryBudget::wake() {
    { std::lock_guard lock(mu_); }
    cv_.notify_all();
}

int64_t DeviceMemoryBudget::in_use() const {
    std::lock_guard lock(mu_);
    return in_use_;
}

int64_t DeviceMemoryBudget::peak_in_use() const {
    std::lock_guard lock(mu_);
    return peak_;
}

int DeviceMemoryBudget::waiting() const {
    std::lock_guard lock(mu_);
    return static_cast<int>(queue_.size());
}

}  // namespace kz
