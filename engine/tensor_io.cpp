#include "engine/tensor_io.h"

#include <stdexcept>

namespace kz {

torch::ScalarType torch_dtype(Dtype d) {
    switch (d) {
        case Dtype::f32: return torch::kFloat32;
        case Dtype::f16: return torch::kFloat16;
        case Dtype::bf16: return torch::kBFloat16;
        case Dtype::f64: return torch::kFloat64;
        case Dtype::i64: return torch::kInt64;
        case Dtype::i32: return torch::kInt32;
        case Dtype::i16: return torch::kInt16;
        case Dtype::i8: return torch::kInt8;
        case Dtype::u8: return torch::kUInt8;
        case Dtype::boolean: return torch::kBool;
    }
    throw std::logic_error("dtype");
}

Dtype safetensors_dtype(torch::ScalarType t) {
    switch (t) {
        case torch::kFloat32: return Dtype::f32;
        case torch::kBFloat16: return Dtype::bf16;
        case torch::kFloat16: return Dtype::f16;
        default: throw std::runtime_error("cannot save weights in this dtype");
    }
}

torch::Tensor to_tensor(const TensorView& v, torch::Device device, torch::ScalarType dtype) {
    auto t =
        torch::from_blob(const_cast<uint8_t*>(v.data), v.shape, torch::TensorOptions().dtype(torch_dtype(v.dtype)));
    return t.to(device, dtype, /*non_blocking=*/false, /*copy=*/true);
}

void save_tensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                  torch::ScalarType dtype, const std::map<std::string, std::string>& metadata) {
    std::vector<torch::Tensor> keep;  // CPU, contiguous copies that outlive the blobs
    std::vector<TensorBlob> blobs;
    for (const auto& [name, t] : tensors) {
        auto c = t.detach().to(torch::kCPU, dtype).contiguous();
        keep.push_back(c);
        blobs.push_back({name, safetensors_dtype(dtype), c.sizes().vec(), c.data_ptr(), c.nbytes()});
    }
    write_safetensors(path, blobs, metadata);
}

}  // namespace kz
