#include "engine/decode_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace kz::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kCandidates = 32;

void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("decode_gemm: ") + what + ": " + cudaGetErrorString(e));
}

void check_lt(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string("decode_gemm: ") + what + " failed (cuBLAS status " +
                                 std::to_string(static_cast<int>(s)) + ")");
}

bool tuning_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("KZ_DECODE_GEMM_TUNING");
        return !(v && std::string(v) == "0");
    }();
    return on;
}

bool capturing(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check_cuda(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
    return status != cudaStreamCaptureStatusNone;
}

// One shape's descriptors, the heuristic's candidates and the algorithm in use.
struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
    std::vector<cublasLtMatmulHeuristicResult_t> candidates;
    size_t chosen = 0;
    bool settled = false;  // timed, or tuning is off
    Plan() = default;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    ~Plan() {
        if (y) cublasLtMatrixLayoutDestroy(y);
        if (x) cublasLtMatrixLayoutDestroy(x);
        if (w) cublasLtMatrixLayoutDestroy(w);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

using PlanKey = std::tuple<int, Half, int64_t, int64_t, int64_t>;  // device, dtype, M, N, K

struct State {
    std::mutex mu;
    std::map<int, cublasLtHandle_t> handles;                   // per device
    std::map<std::pair<int, cudaStream_t>, void*> workspaces;  // per device and stream
    std::map<PlanKey, std::unique_ptr<Plan>> plans;
};

State& state() {
    static State* s = new State;  // never destroyed: graphs may point into the workspaces until exit
    return *s;
}

std::unique_ptr<Plan> make_plan(cublasLtHandle_t lt, Half dtype, int64_t M, int64_t N, int64_t K) {
    auto p = std::make_unique<Plan>();
    const cudaDataType_t type = dtype == Half::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    check_lt(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    // Column-major view: y^T (N, M) = op(W) (N, K) x^T (K, M), W stored as a (K, N) column-major matrix.
    const cublasOperation_t transpose = CUBLAS_OP_T, plain = CUBLAS_OP_N;
    check_lt(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
             "setting TRANSA");
    check_lt(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof plain),
             "setting TRANSB");
    check_lt(cublasLtMatrixLayoutCreate(&p->w, type, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K),
             "weight layout");
    check_lt(cublasLtMatrixLayoutCreate(&p->x, type, static_cast<uint64_t>(K), static_cast<uint64_t>(M), K),
             "input layout");
    check_lt(cublasLtMatrixLayoutCreate(&p->y, type, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N),
             "output layout");
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const size_t ws = kWorkspaceBytes;
    cublasStatus_t s =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    std::vector<cublasLtMatmulHeuristicResult_t> found(kCandidates);
    int count = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt, p->op, p->w, p->x, p->y, p->y, pref, kCandidates, found.data(), &count);
    cublasLtMatmulPreferenceDestroy(pref);
    check_lt(s, "cublasLtMatmulAlgoGetHeuristic");
    for (int i = 0; i < count; ++i)
        if (found[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
            p->candidates.push_back(found[static_cast<size_t>(i)]);
    if (p->candidates.empty())
        throw std::runtime_error("decode_gemm: cuBLASLt has no algorithm for M " + std::to_string(M) + ", N " +
                                 std::to_string(N) + ", K " + std::to_string(K));
    return p;
}

cublasStatus_t run(cublasLtHandle_t lt, const Plan& p, size_t candidate, const void* x, const void* w, void* y,
                   void* ws, cudaStream_t stream) {
    const float alpha = 1.f, beta = 0.f;
    return cublasLtMatmul(lt, p.op, &alpha, w, p.w, x, p.x, &beta, y, p.y, y, p.y, &p.candidates[candidate].algo, ws,
                          kWorkspaceBytes, stream);
}

constexpr float kMargin = 0.97f, kTie = 1.01f;
constexpr int kRounds = 3;

// Times every candidate on `stream` (decode_gemm_choice picks from the times). The weight is read
// from rotating copies of it when two of it fit in L2, else from `w` itself. Each candidate's time
// is its best of kRounds interleaved rounds.
size_t choose_by_timing(cublasLtHandle_t lt, const Plan& p, const void* x, const void* w, void* y, void* ws, int device,
                        int64_t N, int64_t K, cudaStream_t stream) {
    const size_t weight_bytes = static_cast<size_t>(N) * static_cast<size_t>(K) * 2;
    int l2 = 0;
    check_cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute");
    size_t copies = weight_bytes >= 2 * static_cast<size_t>(l2)
                        ? 1
                        : std::min<size_t>(64, 2 * static_cast<size_t>(l2) / weight_bytes + 2);
    void* scratch = nullptr;
    if (copies > 1) {
        if (cudaMalloc(&scratch, copies * weight_bytes) != cudaSuccess) {
            (void)cudaGetLastError();  // out of memory: time on the weight itself
            scratch = nullptr, copies = 1;
        } else {  // copies of the weight itself: zeros would read faster (the GPU compresses them)
            for (size_t r = 0; r < copies; ++r)
                check_cuda(cudaMemcpyAsync(static_cast<char*>(scratch) + r * weight_bytes, w, weight_bytes,
                                           cudaMemcpyDeviceToDevice, stream),
                           "cudaMemcpyAsync");
        }
    }
    auto weight = [&](size_t r) {
        return scratch ? static_cast<const void*>(static_cast<const char*>(scratch) + (r % copies) * weight_bytes) : w;
    };
    cudaEvent_t start = nullptr, stop = nullptr;
    check_cuda(cudaEventCreate(&start), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
    const size_t reps = std::max<size_t>(20, 2 * copies);
    std::vector<float> best_ms(p.candidates.size(), -1.f);  // -1: the candidate does not run here
    for (size_t c = 0; c < p.candidates.size(); ++c)
        if (p.candidates[c].workspaceSize <= kWorkspaceBytes &&
            run(lt, p, c, x, weight(0), y, ws, stream) == CUBLAS_STATUS_SUCCESS)
            best_ms[c] = 0.f;
    for (int round = 0; round < kRounds; ++round)
        for (size_t c = 0; c < p.candidates.size(); ++c) {
            if (best_ms[c] < 0.f) continue;
            for (size_t r = 1; r < copies; ++r) run(lt, p, c, x, weight(r), y, ws, stream);
            check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
            for (size_t r = 0; r < reps; ++r) run(lt, p, c, x, weight(r), y, ws, stream);
            check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
            check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
            float ms = 0.f;
            check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
            if (round == 0 || ms < best_ms[c]) best_ms[c] = ms;
        }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (scratch) check_cuda(cudaFree(scratch), "cudaFree");
    return decode_gemm_choice(best_ms);
}

}  // namespace

size_t decode_gemm_choice(const std::vector<float>& ms) {
    float fastest_ms = -1.f;
    for (float t : ms)
        if (t >= 0.f && (fastest_ms < 0.f || t < fastest_ms)) fastest_ms = t;
    if (fastest_ms < 0.f || (ms[0] >= 0.f && fastest_ms >= kMargin * ms[0])) return 0;
    for (size_t c = 0; c < ms.size(); ++c)
        if (ms[c] >= 0.f && ms[c] <= kTie * fastest_ms) return c;
    return 0;
}

void decode_gemm(Half dtype, const void* x, const void* w, void* y, int64_t M, int64_t N, int64_t K,
                 cudaStream_t stream) {
    if (M <= 0 || N <= 0 || K <= 0)
        throw std::invalid_argument("decode_gemm: empty shape (M " + std::to_string(M) + ", N " + std::to_string(N) +
                                    ", K " + std::to_string(K) + ")");
    if (!aligned16({x, w, y})) throw std::invalid_argument("decode_gemm: pointers must be 16-byte aligned");
    int device = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    State& st = state();
    std::lock_guard lock(st.mu);
    const bool in_capture = capturing(stream);

    cublasLtHandle_t& lt = st.handles[device];
    if (!lt) check_lt(cublasLtCreate(&lt), "cublasLtCreate");
    void*& ws = st.workspaces[{device, stream}];
    if (!ws) {
        // cudaMalloc is not allowed while the stream captures: the eager step before a capture makes it.
        if (in_capture)
            throw std::logic_error(
                "decode_gemm: the first call on a stream is inside a CUDA graph capture; run the step "
                "once on that stream first");
        check_cuda(cudaMalloc(&ws, kWorkspaceBytes), "cudaMalloc of the workspace");
    }
    auto& plan = st.plans[PlanKey{device, dtype, M, N, K}];
    if (!plan) plan = make_plan(lt, dtype, M, N, K);
    if (!plan->settled && !in_capture) {
        if (tuning_enabled()) plan->chosen = choose_by_timing(lt, *plan, x, w, y, ws, device, N, K, stream);
        plan->settled = true;
    }
    check_lt(run(lt, *plan, plan->chosen, x, w, y, ws, stream), "cublasLtMatmul");
}

}  // namespace kz::cuda
