// File helpers with the project's durability rules: whole-file writes go to a temporary name and are
// renamed into place (a reader never sees half a file); appended records are fsync'ed one by one.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kz {

// Writes a large file in pieces with the same rule as write_file_atomic: the bytes go to a temporary
// name in the target's directory; commit() fsyncs and renames; destroying an uncommitted writer
// removes the temporary file (a crash leaves at most a *.tmp.PID file, never a partial target).
class AtomicFileWriter {
public:
    explicit AtomicFileWriter(std::string path);
    ~AtomicFileWriter();
    AtomicFileWriter(const AtomicFileWriter&) = delete;
    AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
    void write(const void* data, size_t n);
    void commit();

private:
    std::string path_, tmp_;
    int fd_ = -1;
};

// An exclusive advisory lock (flock) on the file `path`, created if absent, held for the object's
// life and released by the kernel when the process dies (a crash leaves no stale lock). Only one
// holder at a time, in any process: a second is refused at once with std::runtime_error naming
// `what` (e.g. "runs/x is in use by another trainer") and the lock file.
class FileLock {
public:
    FileLock(const std::string& path, const std::string& what);
    ~FileLock();
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

private:
    int fd_ = -1;
};

// Reads a whole file; throws std::runtime_error("cannot read PATH: REASON").
std::string read_file(const std::string& path);
// Writes `data` to `path` atomically (temporary file in the same directory, fsync, rename).
void write_file_atomic(const std::string& path, const std::string& data);
// Appends one record (which must end in '\n') with a single write(2) and fsyncs it.
void append_durable(const std::string& path, const std::string& record);
// If the file ends in a partial line (a crash during a write), cuts it back to the last '\n'.
void truncate_partial_line(const std::string& path);
// Every JSON object line of a JSONL file of durable appends, in order (a missing file reads as
// empty). A partial last line (a crash mid-write) is cut away first, so that appending afterwards
// starts a clean line; lines that are not JSON objects are skipped and counted in `skipped`.
std::vector<nlohmann::json> read_json_lines(const std::string& path, int* skipped = nullptr);
// True when `s` is well-formed UTF-8.
bool valid_utf8(const std::string& s);
// $KZ_CACHE_DIR, else $XDG_CACHE_HOME/kernelzero, else ~/.cache/kernelzero.
std::string default_cache_dir();
// Creates a fresh private directory under `parent` (mkdtemp).
std::string make_temp_dir(const std::string& parent, const std::string& prefix);

}  // namespace kz
