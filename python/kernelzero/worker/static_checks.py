"""Static checks of candidate source with Python's `ast` (never regex on code), and extraction of what
the compile workers can build ahead of time.

Every check is reported by name as pass/fail; a failing check makes the verdict `rejected` (or
`format_error` for `syntax` and `defines_model_new`). Names reached through aliases are resolved
(`import os as o; o.system(...)`, `from os import system`), so renaming does not dodge a rule."""
from __future__ import annotations

import ast
import re

STATIC_CHECKS = ("syntax", "defines_model_new", "custom_kernel", "forbidden_imports", "forbidden_calls",
                 "exception_handling", "monkey_patching", "introspection", "file_io", "environment",
                 "process_control", "threads_and_streams", "model_tampering")

FORBIDDEN_MODULES = {
    "subprocess", "socket", "threading", "_thread", "multiprocessing", "concurrent", "asyncio", "ctypes",
    "cffi", "gc", "inspect", "atexit", "signal", "importlib", "pickle", "marshal", "shutil", "tempfile",
    "pathlib", "io", "builtins", "urllib", "http", "requests", "selectors", "ssl", "pty", "fcntl",
    "resource", "mmap", "code", "codeop", "runpy", "pdb", "faulthandler", "sched", "traceback", "weakref",
    "dis", "types", "ftplib", "smtplib", "telnetlib", "xmlrpc", "webbrowser", "sqlite3", "shelve", "dbm",
    "zipfile", "tarfile", "glob", "fileinput", "posix", "nt", "platform", "sysconfig", "site",
}
THREAD_MODULES = {"threading", "_thread", "multiprocessing", "concurrent", "asyncio"}

FORBIDDEN_BUILTIN_CALLS = {"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "setattr",
                           "delattr", "breakpoint", "input", "memoryview"}
PROCESS_BUILTINS = {"exit", "quit"}
DANGEROUS_ATTRS = {
    "__dict__", "__class__", "__globals__", "__code__", "__closure__", "__subclasses__", "__builtins__",
    "__mro__", "__bases__", "__base__", "__getattribute__", "__setattr__", "__delattr__", "__self__",
    "__func__", "__wrapped__", "__reduce__", "__reduce_ex__", "__loader__", "__spec__", "__import__",
    "__defaults__", "__kwdefaults__", "__traceback__", "f_back", "f_locals", "f_globals", "f_code",
    "f_builtins", "gi_frame", "gi_code", "tb_frame", "tb_next", "cr_frame", "co_code", "ag_frame",
}
PROCESS_PATHS = {"os.system", "os.popen", "os.fork", "os.forkpty", "os.kill", "os.killpg", "os._exit",
                 "os.abort", "sys.exit", "os.wait", "os.waitpid", "os.setsid", "os.nice"}
PROCESS_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn")
ENV_PATHS = {"os.environ", "os.environb", "os.getenv", "os.putenv", "os.unsetenv", "os.getenvb"}
FILE_PATHS = {"os.open", "os.remove", "os.unlink", "os.rename", "os.renames", "os.replace", "os.mkdir",
              "os.makedirs", "os.rmdir", "os.removedirs", "os.write", "os.truncate", "os.chmod", "os.chown",
              "os.link", "os.symlink", "os.fdopen", "os.pipe", "os.dup", "os.dup2", "os.mkfifo",
              "os.listdir", "os.scandir", "os.walk", "os.chdir", "torch.save", "torch.load",
              "numpy.save", "numpy.savez", "numpy.savetxt", "numpy.load", "numpy.fromfile",
              "numpy.memmap", "torch.from_file"}
FILE_METHODS = {"write_text", "write_bytes", "tofile", "read_text", "read_bytes"}
SYS_ALLOWED = {"sys.version", "sys.version_info", "sys.maxsize", "sys.float_info", "sys.byteorder",
               "sys.platform", "sys.stdout", "sys.stderr"}
INTROSPECTION_PATHS = {"torch._C", "torch._dynamo", "torch._guards", "torch.overrides",
                       "torch.utils._python_dispatch", "torch.library", "torch.fx", "triton.runtime",
                       "triton.knobs", "triton.compiler", "triton.testing", "numpy.ctypeslib",
                       "torch.autograd.profiler", "torch.profiler", "torch.cuda.memory"}
STREAM_PATHS = {"torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
                "torch.cuda.StreamContext", "torch.Stream", "torch.cuda.graph", "torch.cuda.CUDAGraph",
                "torch.cuda.graphs", "torch.cuda.make_graphed_callables", "torch.cuda.comm"}
# The modules whose objects a candidate may call but never assign into.
PROTECTED_ROOTS = {"torch", "triton", "time", "numpy", "kernelzero", "os", "sys", "math", "functools",
                   "itertools", "operator", "random", "builtins", "contextlib", "collections"}
KZC_ALLOWED = {"kernelzero.cuda.compile", "kernelzero.cuda.CompileError"}
LIBRARY_DECLARATION = "KERNELZERO_LIBRARY_OPS"

GLOBAL_KERNEL_RE = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    r"([A-Za-z_]\w*)")


class Report:
    def __init__(self):
        self.checks = {name: "pass" for name in STATIC_CHECKS}
        self.reasons = []
        self.nvrtc_sources = []     # [{"source": str, "options": [str]}]
        self.inline_builds = []     # [kwargs for load_inline]
        self.kernel_names = set()   # names a profiler will show for the candidate's own kernels
        self.triton_kernels = set()
        self.library_ops = []       # declared library ops allowed under the strict policy

    def fail(self, check, node, msg):
        self.checks[check] = "fail"
        line = getattr(node, "lineno", None)
        self.reasons.append(f"{check}: {msg}" + (f" (line {line})" if line else ""))

    def to_json(self):
        return {"checks": self.checks, "reasons": self.reasons, "nvrtc_sources": self.nvrtc_sources,
                "inline_builds": self.inline_builds, "kernel_names": sorted(self.kernel_names),
                "triton_kernels": sorted(self.triton_kernels), "library_ops": self.library_ops}


def _dotted(node, aliases):
    """Resolves Name/Attribute chains to a dotted path through import aliases; None if not rooted in a
    known import or builtin."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    root = aliases.get(node.id)
    if root is None:
        return None
    return ".".join([root] + list(reversed(parts)))


def _root_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


class _Constants:
    """Module-level string constants, so that SRC = r'''...''' ; kzc.compile(SRC) can be built ahead."""

    def __init__(self, tree):
        self.values = {}
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                v = self.resolve(stmt.value)
                if v is not None:
                    self.values[stmt.targets[0].id] = v
                else:
                    self.values.pop(stmt.targets[0].id, None)

    def resolve(self, node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool, int, float)):
            return node.value
        if isinstance(node, ast.Name):
            return self.values.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = self.resolve(node.left), self.resolve(node.right)
            if isinstance(a, str) and isinstance(b, str):
                return a + b
            return None
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.resolve(e) for e in node.elts]
            return None if any(i is None for i in items) else items
        if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
            return "".join(v.value for v in node.values)
        return None


def check_source(source: str, backend: str) -> Report:
    rep = Report()
    tree = _parse(source, rep)
    if tree is None:
        return rep
    consts = _Constants(tree)
    # Builtin names count only while the candidate does not define its own.
    defined = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    defined |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    aliases = _imports_and_aliases(tree, defined, rep)  # first: every later rule sees the aliases
    _find_triton_kernels(tree, aliases, rep)
    _check_names(tree, aliases, rep)
    builds_cuda = _check_calls(tree, aliases, defined, consts, rep)
    _check_try(tree, rep)
    _check_assignments(tree, aliases, rep)
    _check_model_and_kernels(tree, backend, consts, builds_cuda, rep)
    return rep


def _parse(source, rep):
    """The candidate's syntax tree, or None with the syntax check failed in `rep`."""
    try:
        return ast.parse(source, filename="candidate.py")
    except SyntaxError as e:
        why = f"syntax: candidate is not valid Python: {e.msg} (line {e.lineno})"
    except (ValueError, RecursionError) as e:
        why = f"syntax: candidate cannot be parsed: {e}"
    rep.checks = {name: "skip" for name in STATIC_CHECKS}
    rep.checks["syntax"] = "fail"
    rep.reasons.append(why)
    return None


def _imports_and_aliases(tree, defined, rep):
    """Checks the imports; returns every name bound to something reached from an import (or a
    builtin the rules watch), mapped to its dotted path."""
    aliases = {name: name for name in ("open", "exit", "quit", "__builtins__", "__import__") if name not in defined}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if top in FORBIDDEN_MODULES:
                    rep.fail("forbidden_imports", node, f"imports {a.name}")
                    if top in THREAD_MODULES:
                        rep.fail("threads_and_streams", node, f"imports {a.name}")
                aliases[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            top = mod.split(".")[0]
            if node.level:
                rep.fail("forbidden_imports", node, "relative imports are not available to candidates")
            if top in FORBIDDEN_MODULES:
                rep.fail("forbidden_imports", node, f"imports from {mod}")
                if top in THREAD_MODULES:
                    rep.fail("threads_and_streams", node, f"imports from {mod}")
            for a in node.names:
                if a.name == "*":
                    rep.fail("forbidden_imports", node, f"star import from {mod}")
                    continue
                aliases[a.asname or a.name] = f"{mod}.{a.name}"

    # Names bound to something reached from an import (cfg = torch; ev = torch.cuda.Event) are
    # aliases too, so that assignments through them are seen for what they are.
    for _ in range(3):
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Name, ast.Attribute)):
                path = _dotted(node.value, aliases)
                if path:
                    for t in node.targets:
                        if isinstance(t, ast.Name) and t.id not in aliases:
                            aliases[t.id] = path
    return aliases


def _find_triton_kernels(tree, aliases, rep):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                path = _dotted(target, aliases) or ""
                if path in ("triton.jit", "triton.runtime.jit.jit") or path.startswith("triton.autotune") \
                        or path.startswith("triton.heuristics"):
                    if path.endswith("jit"):
                        rep.kernel_names.add(node.name)
                    rep.triton_kernels.add(node.name)


def _classify_path(path, node, rep):
    if path in PROCESS_PATHS or path.startswith(PROCESS_PREFIXES) or path in PROCESS_BUILTINS:
        rep.fail("process_control", node, f"uses {path}")
    elif path in ENV_PATHS:
        rep.fail("environment", node, f"uses {path}")
    elif path in FILE_PATHS or path == "open":
        rep.fail("file_io", node, f"uses {path}")
    elif path.startswith("sys.") and path not in SYS_ALLOWED:
        rep.fail("introspection", node, f"uses {path}")
    elif path in ("__builtins__", "__import__"):
        rep.fail("forbidden_calls" if path == "__import__" else "introspection", node, f"uses {path}")
    elif any(path == p or path.startswith(p + ".") for p in STREAM_PATHS):
        rep.fail("threads_and_streams", node, f"uses {path}")
    elif any(path == p or path.startswith(p + ".") for p in INTROSPECTION_PATHS):
        rep.fail("introspection", node, f"uses {path} (harness internals)")
    elif path.startswith("kernelzero.") and path not in KZC_ALLOWED and path != "kernelzero.cuda":
        rep.fail("introspection", node, f"uses {path}: only kernelzero.cuda.compile is for candidates")
    elif path.startswith("contextlib.suppress"):
        rep.fail("exception_handling", node, "uses contextlib.suppress")


def _check_names(tree, aliases, rep):
    """What names and attribute chains reach: processes, environment, files, harness internals."""
    # Attribute chains are classified at their outermost node only.
    inner = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in DANGEROUS_ATTRS:
                rep.fail("introspection", node, f"accesses .{node.attr}")
            if node.attr in FILE_METHODS:
                rep.fail("file_io", node, f"calls .{node.attr}")
            if id(node) not in inner:
                path = _dotted(node, aliases)
                if path:
                    # check every prefix, so that os.environ.get is caught as os.environ
                    parts = path.split(".")
                    for i in range(len(parts), 0, -1):
                        before = len(rep.reasons)
                        _classify_path(".".join(parts[:i]), node, rep)
                        if len(rep.reasons) != before:
                            break
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in aliases and aliases[node.id] != node.id or node.id in (
                    "open", "exit", "quit", "__builtins__", "__import__"):
                path = aliases.get(node.id)
                if path:
                    _classify_path(path, node, rep)


def _check_calls(tree, aliases, defined, consts, rep):
    """Forbidden builtin calls and computed getattr; records the CUDA sources built ahead of time.
    Returns whether anything calls kernelzero.cuda.compile or load_inline."""
    builds_cuda = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id not in defined:
            if f.id in FORBIDDEN_BUILTIN_CALLS:
                rep.fail("forbidden_calls", node, f"calls {f.id}()")
            if f.id == "getattr" and len(node.args) >= 2:
                name = consts.resolve(node.args[1])
                if not isinstance(name, str):
                    rep.fail("forbidden_calls", node, "getattr with a computed attribute name")
                elif name in DANGEROUS_ATTRS or name.startswith("__"):
                    rep.fail("introspection", node, f"getattr(..., {name!r})")
        path = _dotted(f, aliases) or ""
        is_nvrtc = path == "kernelzero.cuda.compile"
        is_inline = path.endswith("cpp_extension.load_inline") or path == "load_inline"
        builds_cuda = builds_cuda or is_nvrtc or is_inline
        if is_nvrtc:
            src = consts.resolve(node.args[0]) if node.args else None
            opts_node = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "options"), None)
            opts = consts.resolve(opts_node) if opts_node is not None else []
            if isinstance(src, str) and isinstance(opts, list) and all(isinstance(o, str) for o in opts):
                rep.nvrtc_sources.append({"source": src, "options": opts})
        if is_inline:
            kwargs = {}
            ok = not node.args
            for k in node.keywords:
                v = consts.resolve(k.value) if k.arg else None
                if v is None:
                    ok = False
                    break
                kwargs[k.arg] = v
            if ok and "name" in kwargs:
                rep.inline_builds.append(kwargs)
    return builds_cuda


def _check_try(tree, rep):
    """try/except: allowed only at module level around imports (optional dependencies)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))) and node.handlers:
            only_imports = node in tree.body and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in node.body)
            if not only_imports:
                rep.fail("exception_handling", node, "try/except can hide a failing kernel behind a fallback")


def _check_assignments(tree, aliases, rep):
    """Assignments into imported modules (and anything reached from them) or into Model."""
    def check_target(t, node):
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                check_target(e, node)
            return
        if isinstance(t, ast.Starred):
            check_target(t.value, node)
            return
        if isinstance(t, (ast.Attribute, ast.Subscript)):
            root = _root_name(t)
            if root == "Model":
                rep.fail("model_tampering", node, "modifies Model")
            elif root in aliases and aliases[root].split(".")[0] in PROTECTED_ROOTS | FORBIDDEN_MODULES:
                rep.fail("monkey_patching", node, f"assigns into {aliases[root]}")
        if isinstance(t, ast.Name) and t.id == "Model" and isinstance(node, (ast.AugAssign, ast.Delete)):
            rep.fail("model_tampering", node, "rebinds Model")

    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.Delete)):
            for t in node.targets:
                check_target(t, node)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            check_target(node.target, node)


def _check_model_and_kernels(tree, backend, consts, builds_cuda, rep):
    """ModelNew, the kernels the backend needs, and the declared library operators."""
    if not any(isinstance(s, ast.ClassDef) and s.name == "ModelNew" for s in tree.body):
        rep.fail("defines_model_new", tree, "no module-level class ModelNew")
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    for s in strings:
        rep.kernel_names |= set(GLOBAL_KERNEL_RE.findall(s))
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == LIBRARY_DECLARATION
                                                for t in stmt.targets):
            v = consts.resolve(stmt.value)
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                rep.library_ops = v

    if backend == "triton":
        launched = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
                       and _root_name(n.func.value) in rep.triton_kernels for n in ast.walk(tree))
        if not rep.triton_kernels:
            rep.fail("custom_kernel", tree, "backend triton needs at least one @triton.jit kernel")
        elif not launched:
            rep.fail("custom_kernel", tree, "no Triton kernel is launched (kernel[grid](...))")
    else:
        has_global = any("__global__" in s for s in strings)
        if not (builds_cuda and has_global):
            rep.fail("custom_kernel", tree, "backend cuda needs __global__ kernels built with "
                                            "kernelzero.cuda.compile or load_inline")
