// The controller <-> worker wire format: a 4-byte big-endian length, then that many bytes of UTF-8
// JSON (one object). The Python side is python/kernelzero/worker/protocol.py.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/subprocess.h"

namespace kz {

constexpr size_t kMaxFrameBytes = 64u << 20;

std::string encode_frame(const nlohmann::json& msg);

struct FrameRead {
    IoStatus status = IoStatus::ok;
    nlohmann::json msg;
    std::string error;  // set when status is ok but the frame is not a JSON object, or too large
};

// Reads one frame from the process's stdout before `deadline`.
FrameRead read_frame(Process& p, Clock::time_point deadline);
// Decodes a frame payload (used by read_frame and by tests).
bool decode_payload(const std::string& payload, nlohmann::json& out, std::string& error);

}  // namespace kz
