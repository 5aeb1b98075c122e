// Safetensors files (Hugging Face's weight format): an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the bytes.
// Reading maps the file and validates the whole header before anything is used; sharded checkpoints
// (model.safetensors.index.json) are a set of files behind one name -> tensor lookup. No torch here:
// engine/weights.h turns these views into tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kz {

enum class Dtype { f32, f16, bf16, f64, i64, i32, i16, i8, u8, boolean };

// "F32" -> Dtype::f32 ...; throws std::runtime_error naming an unknown dtype.
Dtype dtype_from_safetensors(const std::string& name);
std::string dtype_to_safetensors(Dtype d);
size_t dtype_size(Dtype d);

struct TensorView {
    std::string name;
    Dtype dtype;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;  // owned by the SafetensorsFile, valid while it lives
    size_t nbytes = 0;
    int64_t numel() const;
};

// One mapped file. Throws std::runtime_error("PATH: REASON") for a missing file, a truncated file, a
// header size beyond the file, malformed JSON, an unknown dtype, offsets outside the data, a byte
// count that does not match shape x dtype, or overlapping tensors.
class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::string& path);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const { return path_; }
    const std::map<std::string, TensorView>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

private:
    std::string path_;
    void* map_ = nullptr;
    size_t size_ = 0;
    std::map<std::string, TensorView> tensors_;
    std::map<std::string, std::string> metadata_;
};

// The weights of a Hugging Face model directory: model.safetensors, or the shards listed in
// model.safetensors.index.json ("weight_map": name -> file). Throws naming the missing file.
class Checkpoint {
public:
    explicit Checkpoint(const std::string& model_dir);
    // nullptr when absent.
    const TensorView* find(const std::string& name) const;
    // Throws "tensor NAME is missing from DIR".
    const TensorView& at(const std::string& name) const;
    std::vector<std::string> names() const;

private:
    std::string dir_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::map<std::string, const TensorView*> index_;
};

// A tensor to write: raw little-endian bytes in the given dtype and shape.
struct TensorBlob {
    std::string name;
    Dtype dtype;
    std::vector<int64_t> shape;
    const void* data;
    size_t nbytes;
};

// Writes a safetensors file atomically (temporary name, fsync, rename), tensors sorted by name.
// Throws if a blob's byte count does not match its shape and dtype.
void write_safetensors(const std::string& path, const std::vector<TensorBlob>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace kz
