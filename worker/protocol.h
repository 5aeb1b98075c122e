// The protocol between the C++ controller and its Python workers (python -m kernelzero.worker),
// which the verifier (verify/) and task validation (tasks/) both stand on.
//
// Transport (worker/framing.h, python/kernelzero/worker/protocol.py): each message is a 4-byte
// big-endian length and that many bytes of UTF-8 JSON, one object, over the worker's stdin (requests)
// and a duplicate of its stdout (replies); the worker's own stdout and stderr go to its log. A worker
// first sends {"event": "ready", "role", "pid", "python", "torch"?}, then exactly one reply per
// request, in order. Every request carries "op" and "id"; every reply carries the same "id" and
// "ok": true with the op's fields, or "ok": false with "error" (and "trace", and "task_error": true
// when the task module itself is at fault). A worker that misses a deadline, dies or sends something
// that is not a frame is killed and replaced (worker/worker.h); a failed request leaves it running.
//
// Roles and their ops (fields beyond op/id; "?" optional; sizes in bytes, times in seconds unless
// named _ms):
//
// every role
//   ping                        -> {}
//
// compile (CPU only; one per compile slot; python/kernelzero/worker/compile.py)
//   compile {source, backend: "triton"|"cuda", arch?: "sm_90" (NVRTC; null on the CPU),
//            torch_arch_list?, cache_dir, timeout_s}
//     -> {checks: {name: pass|fail|skip}, reasons, library_ops (declared), kernel_names,
//         triton_kernels, nvrtc_sources, inline_builds, and the build's outcome: compile_error (null
//         or the log), compile_log, cache_hits, builds, extensions_dir (load_inline: the build's
//         directory, else null), compile_s}
//
// reference (trusted; one per lane, on the lane's device; reference.py, validate.py)
//   footprint {task_source}     -> {estimated: bool, params, inputs, outputs, forward}: the task's
//                                  memory from shapes on the meta device (estimated false: it cannot
//                                  run there)
//   baseline {task_source, device, with_compile, timing_iters, min_iters, precision, budget_ms,
//             keep_sets_bytes, lock_path}
//     -> {eager: timing, compiled: timing|null, compile_error, compile_s?, torch, device_name,
//         memory: {params, inputs, outputs, forward, baseline_peak}}; {ok: false, memory_failure:
//         true} when it ran out of device memory, {ok: false, busy: true} when the device lock could
//         not be had
//   open_job {job_id, task_source, device, seed, trials, timeout_s, lock_path, tolerances}
//     -> {channel: {path, token}}: a Unix socket on which the job's candidate child sends its
//        outputs (python/kernelzero/worker/transfer.py); the reference compares each as it arrives
//   close_job {job_id, wait_s} -> {trials: [comparison|null], timing: [...], recheck, ablation_matches?,
//        connected, ended, decided? ("trial 1": where the reference stopped the child), task_error?,
//        memory_failure?, channel_error?, peak_bytes}
//   validate {source, apis: [{name, torch}], device, min_runtime_ms, max_runtime_ms, max_memory_mb,
//             compile, memory_cap_bytes?, work_dir?}
//     -> {valid, checks, reasons, info} (tasks/validation.h names the checks)
//   warm_up {device, compile?, memory_cap_bytes?} -> {context_s, compile_s}: opens the device and
//                                  loads the comparison's kernels (the verifier and the validator
//                                  send it first)
//   device_info {device} -> {device_name, torch, timing_method, arch: {nvrtc, torch_arch_list}|null,
//                            memory: {total, free}|null}
//
// candidate (a fork server; jobs run in sandboxed children, each reused while its jobs leave it as
// they found it; fork_server.py, child_state.py)
//   warm {}                     -> {spares}: keeps a child warm (device opened) for the next job
//   run {job_id, task_source, candidate_source, backend, device, seed, trials, warmup, channel,
//        poison_bytes, memory_cap_bytes|null, kernel_names, extensions_dir, timeout_s,
//        forward_limit_s|null (one forward call's limit, past which the child is killed as hung),
//        cpu_seconds, threads, timing_iters, min_iters, precision, budget_ms, keep_sets_bytes,
//        lock_path}
//     -> {checks, launches, library_ops, all_ops, custom_fraction, share_source, timing, stopped,
//         stages (with child: {job_index, retired: why the child ran no more jobs|null}),
//         memory: {peak_bytes, cap_bytes, tried_bytes}, sandbox, log, job_dir}; a failed run
//         is ok: false with kind (the verdict status it maps to), reason, check?, cuda_error,
//         memory_error, retry?; a child that died without a result adds crashed: true
//
// The device lock (lock_path, python/kernelzero/worker/device_lock.py) is shared by every
// process of one verifier on one device: timed iterations hold it exclusively, all other device
// work shared.
#pragma once

#include <string>
#include <vector>

namespace kz {

// The Python the workers run: $KZ_PYTHON, else the one configured at build time.
std::string default_python();
// Where the kernelzero package is (PYTHONPATH): $KZ_PYTHON_DIR, else the build's configuration.
std::string default_python_dir();
// {default_python(), "-m", "kernelzero.worker"}: the workers' command line, before --role.
std::vector<std::string> default_worker_command();

}  // namespace kz
