#include "worker/protocol.h"

#include <cstdlib>

namespace kz {

#ifndef KZ_DEFAULT_PYTHON
#define KZ_DEFAULT_PYTHON "python3"
#endif
#ifndef KZ_DEFAULT_PYTHON_DIR
#define KZ_DEFAULT_PYTHON_DIR "python"
#endif

std::string default_python() {
    if (const char* p = std::getenv("KZ_PYTHON"); p && *p) return p;
    return KZ_DEFAULT_PYTHON;
}

std::string default_python_dir() {
    if (const char* p = std::getenv("KZ_PYTHON_DIR"); p && *p) return p;
    return KZ_DEFAULT_PYTHON_DIR;
}

std::vector<std::string> default_worker_command() { return {default_python(), "-m", "kernelzero.worker"}; }

}  // namespace kz
