// Safetensors views to torch tensors and back: the one place the engine crosses between the file
// format (engine/safetensors.h) and libtorch.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/safetensors.h"

namespace kz {

torch::ScalarType torch_dtype(Dtype d);
Dtype safetensors_dtype(torch::ScalarType t);  // throws for a dtype safetensors files here do not hold

// A copy of the mapped bytes on `device` in `dtype` (the view's memory is not kept).
torch::Tensor to_tensor(const TensorView& v, torch::Device device, torch::ScalarType dtype);

// Writes the tensors (converted to `dtype`, on the CPU) atomically as one safetensors file.
void save_tensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                  torch::ScalarType dtype, const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace kz
