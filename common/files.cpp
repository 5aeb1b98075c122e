#include "common/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace kz {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw std::runtime_error("cannot read " + path + ": it is a directory");
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path + ": " + strerror(errno));
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) throw std::runtime_error("cannot read " + path + ": read error");
    return ss.str();
}

static void write_all_fd(int fd, const char* data, size_t size, const std::string& path) {
    size_t off = 0;
    while (off < size) {
        ssize_t n = ::write(fd, data + off, size - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw std::runtime_error("cannot write " + path + ": " + strerror(errno));
        }
        off += static_cast<size_t>(n);
    }
}

// Opens `path` with `flags`, writes `data` and fsyncs; the descriptor is closed on every path.
static void write_synced(const std::string& path, int flags, const std::string& data) {
    int fd = ::open(path.c_str(), flags | O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot open " + path + " for writing: " + strerror(errno));
    try {
        write_all_fd(fd, data.data(), data.size(), path);
        if (::fsync(fd) != 0) throw std::runtime_error("cannot sync " + path + ": " + strerror(errno));
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
}

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
    fs::path p(path_);
    if (p.has_parent_path()) fs::create_directories(p.parent_path());
    tmp_ = path_ + ".tmp." + std::to_string(::getpid());
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot open " + tmp_ + " for writing: " + strerror(errno));
}

FileLock::FileLock(const std::string& path, const std::string& what) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot open " + path + ": " + strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd_);
        throw std::runtime_error(what + " (" + path + " is held)");
    }
}

FileLock::~FileLock() { ::close(fd_); }

AtomicFileWriter::~AtomicFileWriter() {
    if (fd_ >= 0) {
        ::close(fd_);
        ::unlink(tmp_.c_str());
    }
}

void AtomicFileWriter::write(const void* data, size_t n) {
    if (fd_ < 0) throw std::runtime_error("write to " + path_ + " after commit");
    write_all_fd(fd_, static_cast<const char*>(data), n, tmp_);
}

void AtomicFileWriter::commit() {
    if (fd_ < 0) throw std::runtime_error("commit of " + path_ + " twice");
    if (::fsync(fd_) != 0) throw std::runtime_error("cannot sync " + tmp_ + ": " + strerror(errno));
    ::close(fd_);
    fd_ = -1;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp_.c_str());
        throw std::runtime_error("cannot rename " + tmp_ + " to " + path_ + ": " + strerror(e));
    }
}

void write_file_atomic(const std::string& path, const std::string& data) {
    AtomicFileWriter w(path);
    w.write(data.data(), data.size());
    w.commit();
}

void append_durable(const std::string& path, const std::string& record) { write_synced(path, O_APPEND, record); }

void truncate_partial_line(const std::string& path) {
    std::error_code ec;
    auto size = fs::file_size(path, ec);
    if (ec || size == 0) return;
    std::string data = read_file(path);
    if (data.back() == '\n') return;
    size_t keep = data.rfind('\n');
    keep = keep == std::string::npos ? 0 : keep + 1;
    if (::truncate(path.c_str(), static_cast<off_t>(keep)) != 0)
        throw std::runtime_error("cannot repair " + path + ": " + strerror(errno));
}

bool valid_utf8(const std::string& s) {
    size_t i = 0, n = s.size();
    while (i < n) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (len == 0 || i + len > n) return false;
        for (size_t k = 1; k < len; ++k)
            if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
        if (len == 2 && c < 0xC2) return false;  // overlong
        i += len;
    }
    return true;
}

std::string default_cache_dir() {
    if (const char* d = std::getenv("KZ_CACHE_DIR"); d && *d) return d;
    if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/kernelzero";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kernelzero";
    return "/tmp/kernelzero-cache";
}

std::string make_temp_dir(const std::string& parent, const std::string& prefix) {
    fs::create_directories(parent);
    std::string tmpl = (fs::path(parent) / (prefix + "XXXXXX")).string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data()))
        throw std::runtime_error("cannot create a directory in " + parent + ": " + strerror(errno));
    return std::string(buf.data());
}

std::vector<nlohmann::json> read_json_lines(const std::string& path, int* skipped) {
    std::vector<nlohmann::json> out;
    int bad = 0;
    if (std::filesystem::exists(path)) {
        truncate_partial_line(path);
        std::ifstream f(path);
        std::string line;
        while (std::getline(f, line)) {
            auto j = nlohmann::json::parse(line, nullptr, false);
            if (j.is_object())
                out.push_back(std::move(j));
            else
                ++bad;
        }
    }
    if (skipped) *skipped = bad;
    return out;
}

}  // namespace kz
