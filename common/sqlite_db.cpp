#include "common/sqlite_db.h"

#include <sqlite3.h>

#include <filesystem>
#include <stdexcept>

namespace kz {

void SqliteClose::operator()(sqlite3* db) const { sqlite3_close(db); }

SqliteDb open_sqlite(const std::string& path, int flags, const std::string& what) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if ((flags & SQLITE_OPEN_CREATE) && !parent.empty()) std::filesystem::create_directories(parent);
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
    SqliteDb db(raw);  // SQLite hands back a handle to close even when the open fails
    if (rc != SQLITE_OK)
        throw std::runtime_error("cannot open " + what + path + ": " + (raw ? sqlite3_errmsg(raw) : "out of memory"));
    return db;
}

}  // namespace kz
