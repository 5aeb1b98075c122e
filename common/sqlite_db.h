// An SQLite connection owned by one object: closed when its owner goes, on every path, a constructor
// that throws after opening it included (its destructor does not run; its members' do).
#pragma once

#include <memory>
#include <string>

struct sqlite3;

namespace kz {

struct SqliteClose {
    void operator()(sqlite3* db) const;
};
using SqliteDb = std::unique_ptr<sqlite3, SqliteClose>;

// sqlite3_open_v2(path, flags), the file's directory created first when flags hold SQLITE_OPEN_CREATE.
// Throws std::runtime_error "cannot open <what><path>: <SQLite's reason>" (std::filesystem_error when
// the directory cannot be made).
SqliteDb open_sqlite(const std::string& path, int flags, const std::string& what);

}  // namespace kz
