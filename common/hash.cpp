#include "common/hash.h"

#include <openssl/sha.h>

namespace kz {

std::string sha256_hex(const std::string& data) {
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned char c : md) {
        out.push_back(hex[c >> 4]);
        out.push_back(hex[c & 15]);
    }
    return out;
}

double unit_hash(const std::string& key) {
    return static_cast<double>(std::stoull(sha256_hex(key).substr(0, 13), nullptr, 16)) /
           static_cast<double>(1ULL << 52);
}

}  // namespace kz
