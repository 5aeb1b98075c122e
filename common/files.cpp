#include "common/files.h"

#include <fcntl.h>
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

static void write_all_fd(int fd, const std::string& data, const std::string& path) {
    size_t off = 0;
    while (off < data.size()) {
        ssize_t n = ::write(fd, data.data() + off, data.size() - off);
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
        write_all_fd(fd, data, path);
        if (::fsync(fd) != 0) throw std::runtime_error("cannot sync " + path + ": " + strerror(errno));
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
}

void write_file_atomic(const std::string& path, const std::string& data) {
    fs::path p(path);
    if (p.has_parent_path()) fs::create_directories(p.parent_path());
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    try {
        write_synced(tmp, O_TRUNC, data);
    } catch (...) {
        ::unlink(tmp.c_str());
        throw;
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + strerror(e));
    }
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
    if (!::mkdtemp(buf.data())) throw std::runtime_error("cannot create a directory in " + parent + ": " + strerror(errno));
    return std::string(buf.data());
}

}  // namespace kz
