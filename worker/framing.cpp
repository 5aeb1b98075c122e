#include "worker/framing.h"

namespace kz {

std::string encode_frame(const nlohmann::json& msg) {
    std::string body = msg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    uint32_t n = static_cast<uint32_t>(body.size());
    std::string out;
    out.reserve(4 + body.size());
    out.push_back(static_cast<char>((n >> 24) & 0xFF));
    out.push_back(static_cast<char>((n >> 16) & 0xFF));
    out.push_back(static_cast<char>((n >> 8) & 0xFF));
    out.push_back(static_cast<char>(n & 0xFF));
    out += body;
    return out;
}

bool decode_payload(const std::string& payload, nlohmann::json& out, std::string& error) {
    try {
        out = nlohmann::json::parse(payload);
    } catch (const nlohmann::json::parse_error& e) {
        error = std::string("worker sent a frame that is not JSON: ") + e.what();
        return false;
    }
    if (!out.is_object()) {
        error = "worker sent a frame that is not a JSON object";
        return false;
    }
    return true;
}

FrameRead read_frame(Process& p, Clock::time_point deadline) {
    FrameRead r;
    std::string header;
    r.status = p.read_exact(4, header, deadline);
    if (r.status != IoStatus::ok) return r;
    uint32_t n = (static_cast<uint32_t>(static_cast<unsigned char>(header[0])) << 24) |
                 (static_cast<uint32_t>(static_cast<unsigned char>(header[1])) << 16) |
                 (static_cast<uint32_t>(static_cast<unsigned char>(header[2])) << 8) |
                 static_cast<uint32_t>(static_cast<unsigned char>(header[3]));
    if (n > kMaxFrameBytes) {
        r.status = IoStatus::error;
        r.error = "worker announced a frame of " + std::to_string(n) + " bytes (limit " +
                  std::to_string(kMaxFrameBytes) + ")";
        return r;
    }
    std::string payload;
    r.status = p.read_exact(n, payload, deadline);
    if (r.status != IoStatus::ok) return r;
    if (!decode_payload(payload, r.msg, r.error)) r.status = IoStatus::error;
    return r;
}

}  // namespace kz
