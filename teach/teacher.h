// The teacher: a rule-based Coder that writes Triton candidates for the symbolic generator's modules
// from their operator graphs (GeneratedTask::steps). Its kernels seed the SFT corpus and serve as a
// baseline Coder; none enters a corpus before the verifier has passed it.
//
// Two qualities:
// - naive: one kernel per operator, every intermediate in global memory;
// - fused: a run of elementwise operators is one kernel; elementwise operators before a row operator
//   (a reduction, softmax, normalisation or scan along one dimension) are applied as it loads, and
//   those after a row operator or a matrix product are applied before it stores.
//
// Supported operator families: elementwise (unary, binary, scalar, bias), activations, reductions
// along a dimension (not the median), softmax / log-softmax / softmin, L2 / L1 / layer / RMS
// normalisation along a dimension, scans (cumulative sum, product, max, min; reverse and exclusive
// sums), matrix products (linear, matmul of rank 2 to 4, transposed operands, bmm, baddbmm, matvec,
// outer, triangular), convolutions (1-D to 3-D, strided, padded, dilated, grouped, depthwise), and the
// layout lines (reshape, slice, cast) between them. A module with any other operator (transposed
// convolution, pooling, attention, channel normalisation, losses, sorting) is not written:
// teach_triton says which operator stopped it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tasks/symbolic.h"

namespace kz {

enum class TeacherQuality { naive, fused };

const char* quality_name(TeacherQuality q);
TeacherQuality parse_quality(const std::string& name);  // throws std::invalid_argument naming it

// The quality a task is taught in when a share of the tasks is fused: fused when a hash of the seed
// and the task's name falls below fused_share, naive otherwise. A function of its arguments alone, so
// teach (`--fused-share`) and corpus (`--fused`) choose alike for the same seed.
TeacherQuality quality_by_share(uint64_t seed, const std::string& task, double fused_share);

struct TeacherCandidate {
    bool written = false;
    std::string source;       // the candidate file (class ModelNew), when written
    std::string unsupported;  // when not: the first operator the teacher cannot write
    int kernels = 0;          // kernel launches in one forward
};

// Whether the teacher writes this catalog API (by name).
bool teacher_supports(const std::string& api);

TeacherCandidate teach_triton(const GeneratedTask& task, TeacherQuality quality);

}  // namespace kz
