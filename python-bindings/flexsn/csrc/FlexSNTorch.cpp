//===- FlexSNTorch.cpp - The Python package's native call path ------------===//
//
// libFlexSNTorch.so: PyTorch operators (namespace `flexsn_native`) that run
// a compiled kernel with no Python between the call and the launch. The
// Python package binds each kernel once (which tensor of a call each pointer
// reads, which result it writes, of what dtype and shape) and then calls:
//
//   launch(id, args)    allocates the results and launches one kernel
//                       (inference, final_state);
//   train(id, leaves)   the training forward as an autograd node whose
//                       backward launches the backward kernel, both in C++;
//   run_plan(id, args)  either of them for a call that matches the
//                       configuration (dtypes, shapes, device, grad mode...)
//                       of the recorded call `id` names, or nothing for one
//                       that does not: the package's fast path, its checks
//                       in C++.
//
// These are the package's only way to launch a kernel. CUDA kernels run on
// PyTorch's current stream of the call's device, read here at each launch
// (so CUDA graph capture and side streams see them where PyTorch's own ops
// would be).
//
// It links against libtorch only, never against libFlexSN.so or the CUDA
// runtime: the package hands it the addresses of `flexsn_kernel_launch`,
// `flexsn_free` and `flexsn_program_destroy` of the library it loaded and of
// PyTorch's current-stream getter (0 in a PyTorch without CUDA). It is built
// against one PyTorch version; flexsn/_opsbuild.py takes it only under that
// version and builds it for the installed one otherwise.
//
// Operators are public: a user, a hand-edited or an exported graph can call
// any of them with anything. So no operator takes an address (the package
// passes addresses through the C functions at the end of this file, which
// it calls by ctypes), and every launch checks each tensor against what the
// kernel was compiled for (count, dtype, size of its role, contiguity,
// device) before a pointer reaches the kernel.
//
//===----------------------------------------------------------------------===//

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <c10/util/hash.h>

#include <atomic>
#include <cstdlib>
#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The C API's launch (include/flexsn-c/FlexSN.h), by address.
using LaunchFn = int (*)(const void *kernel, void *const *ptrs, size_t numPtrs,
                         int64_t T, int64_t NCL, void *stream, unsigned threads,
                         char **error);
using FreeFn = void (*)(void *ptr);
// PyTorch's C shim: the current CUDA stream of a device (0 on success).
using StreamFn = int32_t (*)(int32_t device, void **stream);
using DestroyFn = void (*)(void *program);
using CreateFn = int (*)(const char *source, int target, const char *options,
                         void **program, char **error);
using KernelGetFn = int (*)(void *program, const char *name, int device,
                            void **kernel, char **error);
using DeviceInfoFn = int (*)(int device, int *capability, char **description,
                             char **error);
using PointerFn = int (*)(const void *kernel, size_t index, int *shape,
                          unsigned *elementBytes, int *written, int *optional,
                          char **error);

std::atomic<LaunchFn> launchFn{nullptr};
std::atomic<FreeFn> freeFn{nullptr};
std::atomic<StreamFn> streamFn{nullptr};
std::atomic<DestroyFn> destroyFn{nullptr};
std::atomic<CreateFn> createFn{nullptr};
std::atomic<KernelGetFn> kernelGetFn{nullptr};
std::atomic<DeviceInfoFn> deviceInfoFn{nullptr};
std::atomic<PointerFn> pointerFn{nullptr};

/// One reference to a compiled program of libFlexSN (which owns its kernel
/// handles): the package holds one while its Program lives, and so does
/// every kernel bound to one of its kernels, so that a kernel an autograd
/// graph still holds outlives the package's Program.
struct ProgramRef {
  void *handle;
  ~ProgramRef() {
    if (DestroyFn destroy = destroyFn.load())
      destroy(handle);
  }
};

/// Where Python's package did not hand over libFlexSN's functions (a
/// process without Python: an AOTInductor package run from C++), the
/// operators find the library themselves: $FLEXSN_LIBRARY, else
/// libFlexSN.so beside this library, else the loader's search path. Empty
/// on success, else why not.
std::string initFromLibrary() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    if (launchFn.load())
      return;
    std::vector<std::string> candidates;
    if (const char *env = std::getenv("FLEXSN_LIBRARY"))
      candidates.push_back(env);
    Dl_info self{};
    if (dladdr(reinterpret_cast<void *>(&initFromLibrary), &self) &&
        self.dli_fname) {
      std::string path = self.dli_fname;
      size_t slash = path.rfind('/');
      candidates.push_back(
          (slash == std::string::npos ? "" : path.substr(0, slash + 1)) +
          "libFlexSN.so");
    }
    candidates.push_back("libFlexSN.so");
    std::string tried;
    for (const std::string &path : candidates) {
      void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!lib) {
        tried += (tried.empty() ? "" : "; ") + path + " (" + dlerror() + ")";
        continue;
      }
      auto version =
          reinterpret_cast<int (*)()>(dlsym(lib, "flexsn_api_version"));
      if (!version || version() != 3) {
        tried += (tried.empty() ? "" : "; ") + path + " (not C API version 3)";
        continue;
      }
      auto sym = [&](const char *name) { return dlsym(lib, name); };
      createFn.store(reinterpret_cast<CreateFn>(sym("flexsn_program_create")));
      kernelGetFn.store(
          reinterpret_cast<KernelGetFn>(sym("flexsn_kernel_get")));
      deviceInfoFn.store(
          reinterpret_cast<DeviceInfoFn>(sym("flexsn_cuda_device_info")));
      pointerFn.store(
          reinterpret_cast<PointerFn>(sym("flexsn_kernel_pointer")));
      destroyFn.store(
          reinterpret_cast<DestroyFn>(sym("flexsn_program_destroy")));
      freeFn.store(reinterpret_cast<FreeFn>(sym("flexsn_free")));
      // PyTorch's C shim, where this process has libtorch_cuda
      streamFn.store(reinterpret_cast<StreamFn>(
          dlsym(RTLD_DEFAULT, "aoti_torch_get_current_cuda_stream")));
      launchFn.store(reinterpret_cast<LaunchFn>(sym("flexsn_kernel_launch")));
      return;
    }
    failure = "cannot find libFlexSN.so (tried " + tried +
              "); set FLEXSN_LIBRARY to its path";
  });
  return launchFn.load() ? std::string() : failure;
}

/// One kernel's arguments bound to a call: each read pointer takes the
/// tensor at a position of the call's list (undefined: a null pointer,
/// which the kernel reads as zeros where the manifest allows it); each
/// written pointer a fresh result.
struct BoundKernel {
  enum Shape : int64_t { Seq = 0, Step = 1, Scalar = 2 };
  struct Read {
    int64_t slot, position;
    c10::ScalarType dtype;
    Shape shape; // T·NCL, NCL or one element
    bool optional; // may be None: the kernel reads zeros
    std::string name; // what it is, for errors ("init_state #0")
  };
  struct Result {
    int64_t slot;
    c10::ScalarType dtype;
    Shape shape; // [T, *S], [*S], or a zeroed [1] (an accumulated scalar)
  };
  int64_t id = 0;
  std::string name; // the kernel's, for errors
  const void *kernel = nullptr;
  std::shared_ptr<ProgramRef> program; // owns `kernel`
  size_t numPointers = 0;
  bool cuda = false;
  int64_t device = 0;  // a CUDA kernel's device index
  int64_t numArgs = 0; // tensors (or None) a call passes
  std::vector<Read> reads;
  std::vector<Result> results;
};

/// The training forward and backward kernels of one configuration, and
/// where the forward's results and the backward's gradients sit. An
/// autograd node holds it through a keeper tensor (keeperOf) for as long
/// as its graph lives, whatever the package releases meanwhile.
struct BoundTraining : c10::intrusive_ptr_target {
  int64_t id = 0;
  // what a graph's node carries to bind it in another process (see
  // resolveTraining); passed on to forward/backward while traced
  std::string recipe;
  std::shared_ptr<const BoundKernel> forward, backward;
  // into the forward's results: the outputs, the state results (sequences
  // or final states) the node returns, and what it keeps for the backward
  // (state sequences, saved values)
  std::vector<int64_t> outputIndex, stateIndex, keptIndex;
  // per leaf: whether the backward reads it (the node keeps only those)
  std::vector<bool> leafRead;
  // per leaf (inputs, initial states, parameters): its gradient's index in
  // the backward's results, or -1 where the backward computes none
  std::vector<int64_t> gradIndex;
  // indices into (outputs..., state sequences...) with no gradient path
  std::vector<int64_t> nonDifferentiable;
  int64_t numLeaves = 0;
  // the node keeps every leaf passed and none of the forward's kept
  // results; its backward runs the forward again to get them back
  bool recompute = false;
};

// The launch trace (tests): per launch, the binding's id, its pointer
// count, then 1 per null pointer and 0 per other.
std::atomic<bool> tracing{false};
std::mutex traceMutex;
std::vector<int64_t> traceLog;

// The registries live until the process ends and are never destroyed: at
// exit, destroying a binding would destroy its program in a libFlexSN that
// may already be finalized.
std::mutex registryMutex;
int64_t nextId = 1;
auto &kernels =
    *new std::unordered_map<int64_t, std::shared_ptr<const BoundKernel>>;
auto &trainings =
    *new std::unordered_map<int64_t, c10::intrusive_ptr<BoundTraining>>;
struct BoundPlan;
auto &plans =
    *new std::unordered_map<int64_t, std::shared_ptr<const BoundPlan>>;
// The package's references to its programs, by handle.
auto &programs = *new std::unordered_map<void *, std::shared_ptr<ProgramRef>>;

template <typename Table>
typename Table::mapped_type lookup(const Table &table, int64_t id,
                                   const char *what) {
  std::lock_guard<std::mutex> lock(registryMutex);
  auto it = table.find(id);
  TORCH_CHECK(it != table.end(), "flexsn_native: no bound ", what, " #", id,
              " (released, or never bound)");
  return it->second;
}

/// The id a new binding takes (the caller holds registryMutex): `wanted`
/// where the caller names one (a key derived from what the binding does,
/// so that a graph holding it means the same in every process), else the
/// next of a counter that stays far below such keys.
int64_t claimId(int64_t wanted) {
  if (wanted == 0)
    return nextId++;
  TORCH_CHECK(wanted > 0 && !kernels.count(wanted) &&
                  !trainings.count(wanted) && !plans.count(wanted),
              "flexsn_native: binding id #", wanted,
              " is negative or already bound");
  return wanted;
}

/// PyTorch's current CUDA stream on `device`.
void *currentStream(const c10::Device &device) {
  StreamFn get = streamFn.load();
  TORCH_CHECK(get, "flexsn: a CUDA kernel, but the package found no CUDA "
                   "stream getter in this PyTorch");
  TORCH_CHECK(device.is_cuda(), "flexsn: a CUDA kernel called with tensors on ",
              device);
  void *stream = nullptr;
  TORCH_CHECK(get(device.has_index() ? device.index() : -1, &stream) == 0,
              "flexsn: cannot read the current CUDA stream of ", device);
  return stream;
}

c10::ScalarType dtypeOfCode(int64_t code) {
  switch (code) {
  case 0:
    return at::kFloat;
  case 1:
    return at::kHalf;
  case 2:
    return at::kBFloat16;
  case 3:
    return at::kDouble;
  }
  TORCH_CHECK(false, "unknown dtype code ", code);
}

BoundKernel::Shape shapeOfCode(int64_t code) {
  TORCH_CHECK(code >= 0 && code <= 2, "unknown shape code ", code);
  return static_cast<BoundKernel::Shape>(code);
}


// ---------------------------------------------------------------------------
// Recipes: what a graph carries so that a binding named in it resolves in
// any process (a torch.export artifact loaded elsewhere, an AOTInductor
// package run from C++). A recipe is text:
//
//   flexsn-recipe 2 sha1 <40 hex digits of everything after this line>
//   kernel <id> <cpu|cuda> <entry> <pointers> <tensors per call>
//   options <n>\n<n bytes>\nir <n>\n<n bytes>\n
//   reads <n>, then per read:
//     <slot> <position> <dtype> <shape> <optional> <name>
//   results <n>, then per result: <slot> <dtype> <shape>
//
// or, for a training binding, "training <id> <recompute>", the forward's and
// the backward's kernel sections, then its index lists ("ints <what> <n>
// <values>"). An unknown id with a recipe compiles the program in this
// process (the chip from the call's device) and binds it under that id.
//
// A graph carries that text as one line, "\\" standing for a backslash,
// "\n" for a line break and "\r" for a carriage return: Inductor copies an
// operator's arguments into comments of the Python it generates, where a
// line break would end the comment.
// ---------------------------------------------------------------------------

constexpr int kRecipeVersion = 2;

/// The text of a recipe's one-line form.
std::string recipeText(const std::string &line) {
  std::string text;
  text.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    TORCH_CHECK(c != '\n' && c != '\r', "flexsn_native: a damaged FlexSN "
                "recipe (a line break at byte ", i, ")");
    if (c != '\\') {
      text += c;
      continue;
    }
    char next = i + 1 < line.size() ? line[i + 1] : '\0';
    TORCH_CHECK(next == '\\' || next == 'n' || next == 'r',
                "flexsn_native: a damaged FlexSN recipe (a bad escape at "
                "byte ", i, ")");
    text += next == 'n' ? '\n' : next == 'r' ? '\r' : '\\';
    ++i;
  }
  return text;
}

struct RecipeReader {
  const std::string &text;
  size_t at = 0;

  [[noreturn]] void fail(const std::string &what) const {
    TORCH_CHECK(false, "flexsn_native: a damaged FlexSN recipe (", what,
                " at byte ", at, ")");
  }
  std::string word() {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\n'))
      ++at;
    size_t from = at;
    while (at < text.size() && text[at] != ' ' && text[at] != '\n')
      ++at;
    if (from == at)
      fail("a missing field");
    return text.substr(from, at - from);
  }
  void expect(const char *keyword) {
    if (word() != keyword)
      fail(std::string("no '") + keyword + "'");
  }
  int64_t integer() {
    std::string w = word();
    char *end = nullptr;
    long long v = std::strtoll(w.c_str(), &end, 10);
    if (end != w.c_str() + w.size())
      fail("'" + w + "' is not an integer");
    return v;
  }
  std::string line() {
    if (at < text.size() && text[at] == ' ')
      ++at;
    size_t end = text.find('\n', at);
    if (end == std::string::npos)
      fail("an unterminated line");
    std::string l = text.substr(at, end - at);
    at = end + 1;
    return l;
  }
  std::string bytes(const char *keyword) {
    expect(keyword);
    int64_t n = integer();
    if (at >= text.size() || text[at] != '\n' || n < 0 ||
        static_cast<size_t>(n) > text.size() - at - 1)
      fail(std::string("a bad length of '") + keyword + "'");
    std::string b = text.substr(at + 1, n);
    at += 1 + n;
    return b;
  }
  std::vector<int64_t> ints(const char *what) {
    expect("ints");
    expect(what);
    int64_t n = integer();
    if (n < 0 || n > 1 << 20)
      fail("a bad count");
    std::vector<int64_t> v(n);
    for (int64_t &x : v)
      x = integer();
    return v;
  }
};

/// The body of a recipe's one-line form after its header, which is
/// checked: the format version (read before anything else, so that a
/// recipe of any other format says so), then the checksum of the body.
std::string recipeBody(const std::string &line) {
  RecipeReader head{line};
  TORCH_CHECK(head.word() == "flexsn-recipe",
              "flexsn_native: not a FlexSN recipe (a damaged artifact?)");
  int64_t version = head.integer();
  TORCH_CHECK(version == kRecipeVersion, "flexsn_native: a FlexSN recipe of "
              "format ", version, "; this build of flexsn reads format ",
              kRecipeVersion, " (the artifact was made by another version)");
  std::string recipe = recipeText(line.substr(head.at));
  RecipeReader r{recipe};
  r.expect("sha1");
  std::string digest = r.word();
  if (r.at >= recipe.size() || recipe[r.at] != '\n')
    r.fail("no body");
  std::string body = recipe.substr(r.at + 1);
  TORCH_CHECK(c10::sha1(body).str() == digest,
              "flexsn_native: a FlexSN recipe fails its checksum (the "
              "artifact is damaged)");
  return body;
}

/// Refuses a binding from a recipe whose layout is not the kernel's own:
/// the pointer count, and per pointer bound its shape, element size and
/// direction, and None only where the kernel reads zeros. A recipe is
/// text anyone can write (its checksum catches damage, not intent), so
/// what a launch's checks hold tensors to must come from the compiled
/// kernel.
void checkAgainstKernel(const BoundKernel &bound) {
  PointerFn info = pointerFn.load();
  auto expect = [&](int64_t slot, BoundKernel::Shape shape,
                    c10::ScalarType dtype, bool written, bool optional) {
    int kshape = -1, kwritten = -1, koptional = -1;
    unsigned bytes = 0;
    char *error = nullptr;
    if (info(bound.kernel, slot, &kshape, &bytes, &kwritten, &koptional,
             &error) != 0) {
      std::string message = error ? error : "unknown error";
      if (error)
        freeFn.load()(error);
      TORCH_CHECK(false, "flexsn_native: a recipe's pointer #", slot, ": ",
                  message);
    }
    TORCH_CHECK(kshape == shape && bytes == c10::elementSize(dtype) &&
                    (kwritten != 0) == written && (!optional || koptional),
                "flexsn_native: a recipe's layout is not kernel '",
                bound.name, "''s: pointer #", slot, " is not what it says");
  };
  for (const BoundKernel::Read &r : bound.reads)
    expect(r.slot, r.shape, r.dtype, false, r.optional);
  for (const BoundKernel::Result &r : bound.results)
    expect(r.slot, r.shape, r.dtype, true, false);
}

/// Compiles the program of a kernel section for `device` and binds the
/// kernel (not registered: the caller does).
std::shared_ptr<BoundKernel> bindFromRecipe(RecipeReader &r,
                                            const c10::Device &device,
                                            int64_t *key) {
  r.expect("kernel");
  *key = r.integer();
  std::string target = r.word(), entry = r.word();
  int64_t numPointers = r.integer(), numArgs = r.integer();
  std::string options = r.bytes("options"), ir = r.bytes("ir");
  bool cuda = target == "cuda";
  if (!cuda && target != "cpu")
    r.fail("an unknown target '" + target + "'");
  TORCH_CHECK(cuda == device.is_cuda(), "flexsn_native: a recipe for the ",
              target, " runs on tensors of ", device);
  std::string why = initFromLibrary();
  TORCH_CHECK(why.empty(), "flexsn_native: ", why);
  CreateFn create = createFn.load();
  KernelGetFn kernelGet = kernelGetFn.load();
  int index = cuda ? (device.has_index() ? device.index() : 0) : 0;
  if (cuda) {
    DeviceInfoFn info = deviceInfoFn.load();
    int capability = 0;
    char *error = nullptr;
    TORCH_CHECK(info && info(index, &capability, nullptr, &error) == 0,
                "flexsn_native: cannot read the compute capability of ", device,
                error ? std::string(": ") + error : std::string());
    options += " chip=sm_" + std::to_string(capability);
  }
  char *error = nullptr;
  auto failed = [&](const char *what) {
    std::string message = error ? error : "unknown error";
    if (error)
      freeFn.load()(error);
    TORCH_CHECK(false, "flexsn_native: ", what, " of a recipe failed: ",
                message);
  };
  // One program per (target, options, IR) while a binding holds it: a
  // training recipe's forward and backward share theirs.
  static std::mutex programsMutex;
  static auto &compiled =
      *new std::unordered_map<std::string, std::weak_ptr<ProgramRef>>;
  std::string programKey =
      c10::sha1(target + '\0' + options + '\0' + ir).str();
  std::lock_guard<std::mutex> compiling(programsMutex);
  std::shared_ptr<ProgramRef> ref = compiled[programKey].lock();
  if (!ref) {
    void *program = nullptr;
    if (create(ir.c_str(), cuda ? 1 : 0, options.c_str(), &program,
               &error) != 0)
      failed("compiling the program");
    ref.reset(new ProgramRef{program});
    compiled[programKey] = ref;
  }
  void *kernel = nullptr;
  if (kernelGet(ref->handle, entry.c_str(), index, &kernel, &error) != 0)
    failed("loading the kernel");
  PointerFn info = pointerFn.load();
  TORCH_CHECK(info, "flexsn_native: this libFlexSN cannot describe its "
                    "kernels' pointers (an older build)");
  auto exists = [&](int64_t i) {
    int shape, written, optional;
    unsigned bytes;
    char *ignored = nullptr;
    bool ok = info(kernel, i, &shape, &bytes, &written, &optional,
                   &ignored) == 0;
    if (ignored)
      freeFn.load()(ignored);
    return ok;
  };
  TORCH_CHECK((numPointers == 0 || exists(numPointers - 1)) &&
                  !exists(numPointers),
              "flexsn_native: a recipe gives kernel '", entry, "' ",
              numPointers, " pointers, which is not its count");
  auto bound = std::make_shared<BoundKernel>();
  bound->name = entry;
  bound->kernel = kernel;
  bound->program = std::move(ref);
  bound->numPointers = static_cast<size_t>(numPointers);
  bound->cuda = cuda;
  bound->device = index;
  bound->numArgs = numArgs;
  std::vector<bool> taken(std::max<int64_t>(numPointers, 0), false);
  auto claimSlot = [&](int64_t slot) {
    if (slot < 0 || slot >= numPointers || taken[slot])
      r.fail("a pointer slot out of range or bound twice");
    taken[slot] = true;
  };
  r.expect("reads");
  for (int64_t i = 0, n = r.integer(); i < n; ++i) {
    int64_t slot = r.integer(), position = r.integer(), dtype = r.integer(),
            shape = r.integer(), optional = r.integer();
    claimSlot(slot);
    if (position < 0 || position >= numArgs)
      r.fail("a read position out of range");
    bound->reads.push_back({slot, position, dtypeOfCode(dtype),
                            shapeOfCode(shape), optional != 0, r.line()});
  }
  r.expect("results");
  for (int64_t i = 0, n = r.integer(); i < n; ++i) {
    int64_t slot = r.integer(), dtype = r.integer(), shape = r.integer();
    claimSlot(slot);
    bound->results.push_back({slot, dtypeOfCode(dtype), shapeOfCode(shape)});
  }
  checkAgainstKernel(*bound);
  return bound;
}

/// The device a call's tensors are on (the first one passed).
c10::Device deviceOf(const c10::List<std::optional<at::Tensor>> &args) {
  for (const std::optional<at::Tensor> &t : args)
    if (t.has_value() && t->defined())
      return t->device();
  TORCH_CHECK(false, "flexsn_native: a call without a tensor");
}

/// The binding `id` of `table` where this process has it, else none when a
/// recipe can bind it (else an error).
template <typename Table>
typename Table::mapped_type boundOrRecipe(const Table &table, int64_t id,
                                          const std::string &recipe,
                                          const char *what) {
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    auto it = table.find(id);
    if (it != table.end())
      return it->second;
  }
  TORCH_CHECK(!recipe.empty(), "flexsn_native: no bound ", what, " #", id,
              " (released, or never bound)");
  return {};
}

/// `bound` (from a recipe) registered under `key`, or the binding already
/// there (another thread, or the package, bound the key meanwhile).
std::shared_ptr<const BoundKernel>
registerKernel(std::shared_ptr<BoundKernel> bound, int64_t key) {
  std::lock_guard<std::mutex> lock(registryMutex);
  auto [it, added] = kernels.emplace(key, nullptr);
  if (added) {
    bound->id = key;
    it->second = std::move(bound);
  }
  return it->second;
}

/// The kernel binding `id`, bound from `recipe` where this process has
/// none yet.
std::shared_ptr<const BoundKernel>
resolveKernel(int64_t id, const std::string &recipe,
              const c10::List<std::optional<at::Tensor>> &args) {
  if (auto bound = boundOrRecipe(kernels, id, recipe, "kernel"))
    return bound;
  std::string body = recipeBody(recipe);
  RecipeReader r{body};
  int64_t key = 0;
  std::shared_ptr<BoundKernel> bound = bindFromRecipe(r, deviceOf(args), &key);
  TORCH_CHECK(key == id, "flexsn_native: a recipe for #", key,
              " given for #", id);
  return registerKernel(std::move(bound), id);
}

/// The training binding `id`, bound from `recipe` where this process has
/// none yet.
c10::intrusive_ptr<BoundTraining>
resolveTraining(int64_t id, const std::string &recipe,
                const c10::List<std::optional<at::Tensor>> &args);

/// A training binding of `forward` and `backward` (checked; not
/// registered).
c10::intrusive_ptr<BoundTraining>
makeTraining(std::shared_ptr<const BoundKernel> forward,
             std::shared_ptr<const BoundKernel> backward,
             std::vector<int64_t> outputIndex, std::vector<int64_t> stateIndex,
             std::vector<int64_t> keptIndex, std::vector<int64_t> leafRead,
             std::vector<int64_t> gradIndex,
             std::vector<int64_t> nonDifferentiable, bool recompute) {
  auto bound = c10::make_intrusive<BoundTraining>();
  bound->recompute = recompute;
  bound->forward = std::move(forward);
  bound->backward = std::move(backward);
  int64_t numForwardResults = bound->forward->results.size();
  int64_t numBackwardResults = bound->backward->results.size();
  for (int64_t i : outputIndex)
    TORCH_CHECK(i >= 0 && i < numForwardResults,
                "flexsn_native.bind_train: output index out of range");
  for (int64_t i : stateIndex)
    TORCH_CHECK(i >= 0 && i < numForwardResults,
                "flexsn_native.bind_train: state index out of range");
  for (int64_t i : keptIndex)
    TORCH_CHECK(i >= 0 && i < numForwardResults,
                "flexsn_native.bind_train: kept index out of range");
  TORCH_CHECK(leafRead.size() == gradIndex.size(),
              "flexsn_native.bind_train: ", leafRead.size(),
              " leaf-read flags for ", gradIndex.size(), " leaves");
  TORCH_CHECK(static_cast<int64_t>(gradIndex.size()) ==
                  bound->forward->numArgs,
              "flexsn_native.bind_train: ", gradIndex.size(),
              " leaves for a forward kernel of ", bound->forward->numArgs,
              " tensors");
  for (int64_t i : gradIndex)
    TORCH_CHECK(i >= -1 && i < numBackwardResults,
                "flexsn_native.bind_train: gradient index out of range");
  int64_t numResults = outputIndex.size() + stateIndex.size();
  for (int64_t i : nonDifferentiable)
    TORCH_CHECK(i >= 0 && i < numResults,
                "flexsn_native.bind_train: result index out of range");
  bound->outputIndex = std::move(outputIndex);
  bound->stateIndex = std::move(stateIndex);
  bound->keptIndex = std::move(keptIndex);
  for (int64_t r : leafRead)
    bound->leafRead.push_back(r != 0);
  bound->numLeaves = gradIndex.size();
  bound->gradIndex = std::move(gradIndex);
  bound->nonDifferentiable = std::move(nonDifferentiable);
  return bound;
}

/// Registers `bound` under `wanted` (0: a fresh id), or returns the
/// binding already there: an id derived from content names one binding.
c10::intrusive_ptr<BoundTraining>
registerTraining(c10::intrusive_ptr<BoundTraining> bound, int64_t wanted) {
  std::lock_guard<std::mutex> lock(registryMutex);
  if (wanted > 0) {
    auto it = trainings.find(wanted);
    if (it != trainings.end())
      return it->second;
  }
  bound->id = claimId(wanted);
  trainings.emplace(bound->id, bound);
  return bound;
}

int64_t bindTraining(int64_t forward, int64_t backward,
                     std::vector<int64_t> outputIndex,
                     std::vector<int64_t> stateIndex,
                     std::vector<int64_t> keptIndex,
                     std::vector<int64_t> leafRead,
                     std::vector<int64_t> gradIndex,
                     std::vector<int64_t> nonDifferentiable, bool recompute,
                     int64_t wantedId, std::string recipe) {
  auto bound = makeTraining(
      lookup(kernels, forward, "kernel"), lookup(kernels, backward, "kernel"),
      std::move(outputIndex), std::move(stateIndex), std::move(keptIndex),
      std::move(leafRead), std::move(gradIndex), std::move(nonDifferentiable),
      recompute);
  bound->recipe = std::move(recipe);
  return registerTraining(std::move(bound), wantedId)->id;
}

c10::intrusive_ptr<BoundTraining>
resolveTraining(int64_t id, const std::string &recipe,
                const c10::List<std::optional<at::Tensor>> &args) {
  if (auto bound = boundOrRecipe(trainings, id, recipe, "training"))
    return bound;
  std::string body = recipeBody(recipe);
  RecipeReader r{body};
  r.expect("training");
  int64_t key = r.integer();
  bool recompute = r.integer() != 0;
  TORCH_CHECK(key == id, "flexsn_native: a recipe for #", key, " given for #",
              id);
  c10::Device device = deviceOf(args);
  int64_t forwardKey = 0, backwardKey = 0;
  std::shared_ptr<BoundKernel> forward = bindFromRecipe(r, device, &forwardKey);
  std::shared_ptr<BoundKernel> backward =
      bindFromRecipe(r, device, &backwardKey);
  std::vector<int64_t> out = r.ints("out"), state = r.ints("state"),
                       kept = r.ints("kept"), read = r.ints("read"),
                       grad = r.ints("grad"), nondiff = r.ints("nondiff");
  auto bound = makeTraining(registerKernel(std::move(forward), forwardKey),
                            registerKernel(std::move(backward), backwardKey),
                            std::move(out), std::move(state), std::move(kept),
                            std::move(read), std::move(grad),
                            std::move(nondiff), recompute);
  bound->recipe = recipe;
  return registerTraining(std::move(bound), id);
}

std::vector<int64_t> trace(bool on) {
  std::lock_guard<std::mutex> lock(traceMutex);
  tracing.store(on);
  std::vector<int64_t> log;
  log.swap(traceLog);
  return log;
}

void release(int64_t id) {
  std::lock_guard<std::mutex> lock(registryMutex);
  kernels.erase(id);
  trainings.erase(id);
  plans.erase(id);
}

const char *shapeName(BoundKernel::Shape shape) {
  switch (shape) {
  case BoundKernel::Seq:
    return "T*NCL";
  case BoundKernel::Step:
    return "NCL";
  case BoundKernel::Scalar:
    break;
  }
  return "1";
}

/// Refuses a call of `bound` whose tensors are not what it was compiled for
/// (at T steps of NCL neurons, on `device`), naming the first argument that
/// is not and what was expected: the call's tensor count; per tensor passed,
/// a strided dense tensor on the binding's device (type and index); per
/// tensor the kernel reads, its dtype, element count (T*NCL, NCL or one
/// element) and contiguity, and None only where the kernel reads zeros.
void checkCall(const BoundKernel &bound, const std::vector<at::Tensor> &args,
               int64_t T, int64_t NCL) {
  TORCH_CHECK(static_cast<int64_t>(args.size()) == bound.numArgs,
              "flexsn_native: kernel '", bound.name, "' takes ", bound.numArgs,
              " tensors (or None); the call passes ", args.size());
  c10::Device device = bound.cuda
                           ? c10::Device(c10::kCUDA, bound.device)
                           : c10::Device(c10::kCPU);
  for (size_t j = 0; j < args.size(); ++j) {
    const at::Tensor &t = args[j];
    if (!t.defined())
      continue;
    TORCH_CHECK(t.device() == device, "flexsn_native: tensor #", j,
                " of the call is on ", t.device(), "; kernel '", bound.name,
                "' runs on ", device);
    TORCH_CHECK(t.layout() == at::kStrided && !t.is_nested() && !t.is_neg() &&
                    !t.is_conj(),
                "flexsn_native: tensor #", j, " of the call is not a plain "
                "dense tensor (layout ", t.layout(), ")");
  }
  for (const BoundKernel::Read &r : bound.reads) {
    const at::Tensor &t = args[r.position];
    if (!t.defined()) {
      TORCH_CHECK(r.optional, "flexsn_native: tensor #", r.position, " (",
                  r.name, ") is None; kernel '", bound.name, "' reads it");
      continue;
    }
    TORCH_CHECK(t.scalar_type() == r.dtype, "flexsn_native: tensor #",
                r.position, " (", r.name, ") is ", t.scalar_type(),
                "; kernel '", bound.name, "' was compiled for ", r.dtype);
    int64_t want = r.shape == BoundKernel::Seq    ? T * NCL
                   : r.shape == BoundKernel::Step ? NCL
                                                  : 1;
    TORCH_CHECK(t.numel() == want, "flexsn_native: tensor #", r.position,
                " (", r.name, ") holds ", t.numel(), " elements; kernel '",
                bound.name, "' reads ", shapeName(r.shape), " = ", want,
                " (T=", T, ", NCL=", NCL, ")");
    TORCH_CHECK(t.is_contiguous(), "flexsn_native: tensor #", r.position,
                " (", r.name, ") is not contiguous; kernel '", bound.name,
                "' reads it as one dense block (pass .contiguous())");
  }
}

/// Allocates `bound`'s results and launches it on `args` (input #0 first:
/// it gives T and the per-step shape), after checkCall.
std::vector<at::Tensor> run(const BoundKernel &bound,
                            const std::vector<at::Tensor> &args,
                            at::IntArrayRef seqShape,
                            at::TensorOptions options);

std::vector<at::Tensor> run(const BoundKernel &bound,
                            const std::vector<at::Tensor> &args) {
  TORCH_CHECK(!args.empty() && args[0].defined() && args[0].dim() >= 1 &&
                  args[0].size(0) > 0,
              "flexsn_native: input #0 must be a [T, ...] tensor with T > 0");
  return run(bound, args, args[0].sizes(), args[0].options());
}

/// The same with the call's [T, *S] shape and device given (a backward that
/// does not read input #0).
std::vector<at::Tensor> run(const BoundKernel &bound,
                            const std::vector<at::Tensor> &args,
                            at::IntArrayRef seqShape,
                            at::TensorOptions options) {
  LaunchFn launch = launchFn.load();
  if (!launch) {
    std::string why = initFromLibrary();
    TORCH_CHECK(why.empty(), "flexsn_native: ", why);
    launch = launchFn.load();
  }
  TORCH_CHECK(!seqShape.empty() && seqShape[0] > 0,
              "flexsn_native: a [T, ...] call with T > 0, not ", seqShape);
  int64_t T = seqShape[0];
  int64_t NCL = 1;
  for (int64_t d : seqShape.slice(1))
    TORCH_CHECK(d >= 0 && !__builtin_mul_overflow(NCL, d, &NCL),
                "flexsn_native: the call's shape ", seqShape,
                " is negative or overflows");
  int64_t total = 0;
  TORCH_CHECK(!__builtin_mul_overflow(T, NCL, &total),
              "flexsn_native: the call's shape ", seqShape, " overflows");
  checkCall(bound, args, T, NCL);
  // The pointer array on the stack for the usual kernel (a heap array past
  // that); zeroed: a pointer no read or result sets stays null.
  constexpr size_t kInlinePointers = 32;
  void *inlinePointers[kInlinePointers] = {};
  std::vector<void *> heapPointers;
  void **pointers = inlinePointers;
  if (bound.numPointers > kInlinePointers) {
    heapPointers.assign(bound.numPointers, nullptr);
    pointers = heapPointers.data();
  }
  for (const BoundKernel::Read &r : bound.reads) {
    const at::Tensor &t = args[r.position];
    if (t.defined())
      pointers[r.slot] = t.data_ptr();
  }
  at::IntArrayRef stepShape = seqShape.slice(1);
  std::vector<at::Tensor> results;
  results.reserve(bound.results.size());
  for (const BoundKernel::Result &r : bound.results) {
    at::Tensor t;
    switch (r.shape) {
    case BoundKernel::Seq:
      t = at::empty(seqShape, options.dtype(r.dtype));
      break;
    case BoundKernel::Step:
      t = at::empty(stepShape, options.dtype(r.dtype));
      break;
    case BoundKernel::Scalar:
      t = at::zeros({1}, options.dtype(r.dtype));
      break;
    }
    pointers[r.slot] = t.data_ptr();
    results.push_back(std::move(t));
  }
  if (tracing.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(traceMutex);
    traceLog.push_back(bound.id);
    traceLog.push_back(bound.numPointers);
    for (size_t i = 0; i < bound.numPointers; ++i)
      traceLog.push_back(pointers[i] == nullptr);
  }
  char *error = nullptr;
  void *cuStream = bound.cuda ? currentStream(options.device()) : nullptr;
  unsigned threads = bound.cuda ? 0 : at::get_num_threads();
  if (launch(bound.kernel, pointers, bound.numPointers, T, NCL, cuStream,
             threads, &error) != 0) {
    std::string message = error ? error : "unknown error";
    if (error)
      freeFn.load()(error);
    TORCH_CHECK(false, "flexsn: kernel launch failed: ", message);
  }
  return results;
}

/// A Tensor?[] argument as tensors, undefined where it holds None.
std::vector<at::Tensor>
asTensors(const c10::List<std::optional<at::Tensor>> &list) {
  std::vector<at::Tensor> tensors;
  tensors.reserve(list.size());
  for (const std::optional<at::Tensor> &t : list)
    tensors.push_back(t.has_value() ? *t : at::Tensor());
  return tensors;
}

std::vector<at::Tensor>
launchOp(int64_t id, const c10::List<std::optional<at::Tensor>> &args,
         c10::string_view recipe) {
  std::shared_ptr<const BoundKernel> bound =
      resolveKernel(id, std::string(recipe), args);
  return run(*bound, asTensors(args));
}

/// A training binding held by a tensor: a one-element int64 CPU tensor
/// holding the binding's id, whose storage's context owns a reference to
/// the binding. Saved with the node's tensors, it keeps the binding alive
/// while the graph lives, and it is a plain tensor to torch.compile's
/// compiled autograd, which lifts a node's saved tensors into its graph but
/// cannot hash an opaque object in its saved data.
struct Keeper {
  int64_t id;
  c10::intrusive_ptr<BoundTraining> bound;
};

void deleteKeeper(void *keeper) { delete static_cast<Keeper *>(keeper); }

at::Tensor keeperOf(const c10::intrusive_ptr<BoundTraining> &bound) {
  auto *keeper = new Keeper{bound->id, bound};
  return at::for_blob(&keeper->id, {1})
      .context(keeper, &deleteKeeper)
      .options(at::TensorOptions().dtype(at::kLong).device(at::kCPU))
      .make_tensor();
}

/// The binding a saved keeper holds. A saved-tensor hook that copies what
/// it saves (torch.autograd.graph.save_on_cpu(pin_memory=True)) hands back
/// a copy without the reference: then the id finds the binding, as long as
/// the package has not released it.
c10::intrusive_ptr<BoundTraining> boundOf(const at::Tensor &keeper) {
  if (keeper.defined() && keeper.has_storage() &&
      keeper.storage().data_ptr().get_deleter() == &deleteKeeper)
    return static_cast<Keeper *>(keeper.storage().data_ptr().get_context())
        ->bound;
  TORCH_CHECK(keeper.defined() && keeper.numel() == 1 &&
                  keeper.scalar_type() == at::kLong,
              "flexsn: a FlexSN training node's saved tensors lack the one "
              "that names its kernels (did a saved-tensor hook drop it?)");
  int64_t id = keeper.item<int64_t>();
  std::lock_guard<std::mutex> lock(registryMutex);
  auto it = trainings.find(id);
  TORCH_CHECK(it != trainings.end(),
              "flexsn: the kernels of this FlexSN training node were released "
              "(its module or kernel was deleted) and a saved-tensor hook "
              "copied the tensor that kept them alive; keep the module alive "
              "until its backward has run");
  return it->second;
}

/// A Tensor?[] argument from tensors (undefined: None).
c10::List<std::optional<at::Tensor>>
asList(const std::vector<at::Tensor> &tensors) {
  c10::List<std::optional<at::Tensor>> list;
  list.reserve(tensors.size());
  for (const at::Tensor &t : tensors)
    list.push_back(t.defined() ? std::optional<at::Tensor>(t) : std::nullopt);
  return list;
}

/// The training forward kernel of training binding `id` on its leaves: all
/// its results (outputs, state results, then what it keeps for the
/// backward: state sequences, saved values), in the kernel's order.
std::vector<at::Tensor>
forwardOp(int64_t id, const c10::List<std::optional<at::Tensor>> &leaves,
          c10::string_view recipe) {
  c10::intrusive_ptr<BoundTraining> bound =
      resolveTraining(id, std::string(recipe), leaves);
  return run(*bound->forward, asTensors(leaves));
}

/// The backward kernel of `bound` on `args` (the leaves it reads, the kept
/// forward results, the gradients of the outputs and state results;
/// undefined where there are none) for a call of shape `seqShape` ([T,
/// *S]), its results on the device of the first tensor given: all its
/// results, in the kernel's order.
std::vector<at::Tensor> runBackward(const BoundTraining &bound,
                                    const std::vector<at::Tensor> &args,
                                    c10::SymIntArrayRef seqShape) {
  const at::Tensor *device = nullptr;
  for (const at::Tensor &t : args)
    if (t.defined() && !device)
      device = &t;
  TORCH_CHECK(device, "flexsn: a FlexSN backward without a tensor to take "
                      "the device from");
  return run(*bound.backward, args, C10_AS_INTARRAYREF_SLOW(seqShape),
             device->options());
}

/// forwardOp again in a recompute node's backward. `after` (a gradient
/// the backward was given) is not read: it makes the call depend on the
/// backward's inputs, so that a traced graph's partitioner keeps it in the
/// backward instead of moving it into the forward and saving its results.
std::vector<at::Tensor>
recomputeOp(int64_t id, const c10::List<std::optional<at::Tensor>> &leaves,
            const std::optional<at::Tensor> &after, c10::string_view recipe) {
  (void)after;
  return forwardOp(id, leaves, recipe);
}

/// runBackward of training binding `id`, as an operator.
std::vector<at::Tensor>
backwardOp(int64_t id, const c10::List<std::optional<at::Tensor>> &args,
           c10::SymIntArrayRef seqShape, c10::string_view recipe) {
  c10::intrusive_ptr<BoundTraining> bound =
      resolveTraining(id, std::string(recipe), args);
  return runBackward(*bound, asTensors(args), seqShape);
}

/// Whether a call on `tensors` is being traced (torch.compile: fake or
/// functional tensors, a dispatch mode) rather than run.
bool traced(const std::vector<at::Tensor> &tensors) {
  if (c10::impl::TorchDispatchModeTLS::any_modes_set())
    return true;
  constexpr c10::DispatchKeySet tracing({c10::DispatchKey::Python,
                                         c10::DispatchKey::Functionalize});
  for (const at::Tensor &t : tensors)
    if (t.defined() && t.key_set().has_any(tracing))
      return true;
  return false;
}

/// The two operators above as the training node calls them: through the
/// dispatcher while traced, so that their fake implementations run and they
/// become the graph's nodes; on real tensors their kernel directly (what
/// the dispatcher would pick, without its cost on every training step).
std::vector<at::Tensor>
callForward(const BoundTraining &bound, const std::vector<at::Tensor> &leaves) {
  if (!traced(leaves))
    return run(*bound.forward, leaves);
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("flexsn_native::forward", "")
                       .typed<decltype(forwardOp)>();
  return op.call(bound.id, asList(leaves), bound.recipe);
}

std::vector<at::Tensor> callRecompute(const BoundTraining &bound,
                                      const std::vector<at::Tensor> &leaves,
                                      const at::Tensor &after) {
  if (!traced(leaves))
    return run(*bound.forward, leaves);
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("flexsn_native::recompute", "")
                       .typed<decltype(recomputeOp)>();
  return op.call(bound.id, asList(leaves),
                 after.defined() ? std::optional<at::Tensor>(after)
                                 : std::nullopt,
                 bound.recipe);
}

std::vector<at::Tensor> callBackward(const BoundTraining &bound,
                                     const std::vector<at::Tensor> &args,
                                     c10::SymIntArrayRef seqShape) {
  if (!traced(args))
    return runBackward(bound, args, seqShape);
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("flexsn_native::backward", "")
                       .typed<decltype(backwardOp)>();
  return op.call(bound.id, asList(args), seqShape, bound.recipe);
}

/// The training forward as an autograd node, over the operators `forward`
/// and `backward`; its backward runs on the current stream, which PyTorch
/// sets to the stream the forward used while it runs a node's backward.
/// Saved: the leaves the backward reads (undefined where it reads none or
/// the call passed none: an initial state of zeros), the kept forward
/// results (state sequences, saved values) and the binding's keeper; in
/// saved_data the call's [T, *S] shape and, per passed leaf it does not
/// keep, its index, dtype and shape (which compiled autograd lifts into its
/// graph as inputs; symbolic under torch.compile's dynamic shapes). The
/// node marks nothing non-differentiable (compiled autograd refuses such
/// nodes): trainOp detaches those results instead. A recompute binding
/// saves every leaf passed and no kept results: its backward runs the
/// forward kernel again for them.
struct ScanNode : public torch::autograd::Function<ScanNode> {
  static variable_list forward(AutogradContext *ctx,
                               const c10::intrusive_ptr<BoundTraining> &bound,
                               const std::vector<at::Tensor> *leaves,
                               at::TensorList definedLeaves) {
    (void)definedLeaves; // the same tensors: what autograd tracks
    TORCH_CHECK(!leaves->empty() && (*leaves)[0].defined(),
                "flexsn_native.train: the call's input #0 is missing");
    std::vector<at::Tensor> results = callForward(*bound, *leaves);
    variable_list outputs;
    outputs.reserve(bound->outputIndex.size() + bound->stateIndex.size());
    for (int64_t i : bound->outputIndex)
      outputs.push_back(results[i]);
    for (int64_t i : bound->stateIndex)
      outputs.push_back(results[i]);
    // Per passed leaf not kept: its index, dtype and shape: 0 the call's
    // [T, *S], 1 its [*S], 2 another (in saved_data "shape<index>").
    std::vector<int64_t> unkept;
    c10::SymIntArrayRef seq = (*leaves)[0].sym_sizes();
    variable_list toSave;
    toSave.reserve(leaves->size() + bound->keptIndex.size() + 1);
    for (size_t j = 0; j < leaves->size(); ++j) {
      const at::Tensor &leaf = (*leaves)[j];
      bool keep = bound->leafRead[j] || bound->recompute;
      if (leaf.defined() && !keep) {
        c10::SymIntArrayRef sizes = leaf.sym_sizes();
        int64_t shape = sizes == seq ? 0 : sizes == seq.slice(1) ? 1 : 2;
        unkept.insert(unkept.end(),
                      {static_cast<int64_t>(j),
                       static_cast<int64_t>(leaf.scalar_type()), shape});
        if (shape == 2)
          ctx->saved_data["shape" + std::to_string(j)] = sizes;
      }
      toSave.push_back(keep ? leaf : at::Tensor());
    }
    if (!bound->recompute)
      for (int64_t i : bound->keptIndex)
        toSave.push_back(results[i]);
    toSave.push_back(keeperOf(bound));
    ctx->set_materialize_grads(false);
    ctx->save_for_backward(std::move(toSave));
    ctx->saved_data["seq"] = seq;
    ctx->saved_data["unkept"] = std::move(unkept);
    return outputs;
  }

  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    TORCH_CHECK(!saved.empty(), "flexsn: a FlexSN training node without its "
                                "saved tensors");
    c10::intrusive_ptr<BoundTraining> bound = boundOf(saved.back());
    saved.pop_back();
    // The kernels compute first-order gradients only: a graph of the
    // backward (create_graph=True) would silently lack their terms.
    if (torch::autograd::GradMode::is_enabled())
      for (const at::Tensor &g : grads)
        TORCH_CHECK(!g.defined() || !g.requires_grad(),
                    "flexsn: the backward of a compiled core is not "
                    "differentiable (create_graph=True, double backward); "
                    "run the core with backend='torch' for that");
    int64_t n = bound->numLeaves;
    std::vector<at::Tensor> args(saved.begin(), saved.end());
    if (bound->recompute) {
      // the forward again, on the same leaves: the same kept results, bit
      // for bit; then the leaves the backward does not read are dropped
      at::Tensor after;
      for (const at::Tensor &g : grads)
        if (g.defined() && !after.defined())
          after = g;
      std::vector<at::Tensor> again = callRecompute(*bound, args, after);
      for (int64_t j = 0; j < n; ++j)
        if (!bound->leafRead[j])
          args[j] = at::Tensor();
      for (int64_t i : bound->keptIndex)
        args.push_back(again[i]);
    }
    for (at::Tensor &g : grads)
      args.push_back(g.defined() && !g.is_contiguous() ? g.contiguous()
                                                       : std::move(g));
    std::vector<c10::SymInt> seq = ctx->saved_data["seq"].toSymIntVector();
    std::vector<at::Tensor> results = callBackward(*bound, args, seq);
    std::vector<int64_t> unkept = ctx->saved_data["unkept"].toIntVector();
    // Two untracked arguments (bound, the leaves' pointer), then one
    // gradient per tracked (defined) leaf.
    size_t pos = 0;
    variable_list out(2);
    for (int64_t j = 0; j < n; ++j) {
      const at::Tensor &leaf = saved[j];
      // Not kept and not in "unkept": the call passed none.
      bool isUnkept = pos < unkept.size() && unkept[pos] == j;
      if (!leaf.defined() && !isUnkept)
        continue;
      c10::ScalarType dtype = at::kFloat; // set below, from the leaf or "unkept"
      std::vector<c10::SymInt> sizes;
      if (leaf.defined()) {
        dtype = leaf.scalar_type();
        sizes = leaf.sym_sizes().vec();
      } else {
        dtype = static_cast<c10::ScalarType>(unkept[pos + 1]);
        int64_t shape = unkept[pos + 2];
        if (shape == 2)
          sizes = ctx->saved_data["shape" + std::to_string(j)].toSymIntVector();
        else
          sizes.assign(seq.begin() + shape, seq.end());
        pos += 3;
      }
      int64_t ix = bound->gradIndex[j];
      if (ix < 0) {
        out.emplace_back();
        continue;
      }
      at::Tensor g = results[ix];
      if (g.scalar_type() != dtype)
        g = g.to(dtype);
      if (g.sym_sizes() != c10::SymIntArrayRef(sizes)) // a state or scalar shaped otherwise
        g = g.view_symint(sizes);
      out.push_back(std::move(g));
    }
    return out;
  }
};

/// The training forward of `bound` on `all` (its leaves, undefined where
/// the call passes none) as an autograd node: outputs, then state results.
std::vector<at::Tensor> train(const c10::intrusive_ptr<BoundTraining> &bound,
                              std::vector<at::Tensor> all) {
  std::vector<at::Tensor> defined;
  for (const at::Tensor &t : all)
    if (t.defined())
      defined.push_back(t);
  std::vector<at::Tensor> outputs =
      ScanNode::apply(bound, &all, at::TensorList(defined));
  for (int64_t i : bound->nonDifferentiable)
    outputs[i] = outputs[i].detach();
  return outputs;
}

std::vector<at::Tensor>
trainOp(int64_t id, const c10::List<std::optional<at::Tensor>> &leaves,
        c10::string_view recipe) {
  c10::intrusive_ptr<BoundTraining> bound =
      resolveTraining(id, std::string(recipe), leaves);
  TORCH_CHECK(static_cast<int64_t>(leaves.size()) == bound->numLeaves,
              "flexsn_native.train: ", leaves.size(),
              " leaves for a kernel of ", bound->numLeaves);
  return train(bound, asTensors(leaves));
}

/// A call's configuration, recorded for the package's fast path (its
/// _runner.FastPathPlan): a later call through run_plan is checked against it here
/// and, when it matches, launches the plan's inference kernel or training
/// node with no Python in between. The configuration: grad mode; per
/// tensor of the call (inputs, initial states, parameters) whether it is
/// passed, its dtype, device, sizes and contiguity, and in grad mode
/// whether it requires grad.
struct BoundPlan {
  struct Slot {
    bool passed = false;
    c10::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes;
    bool requiresGrad = false;
  };
  int64_t id = 0;
  std::shared_ptr<const BoundKernel> kernel;  // inference: one launch
  c10::intrusive_ptr<BoundTraining> training; // or a training node
  std::vector<int64_t> order; // inference: the results returned, in order
  // training: the state results are sequences, and a planned call returns
  // their last steps (the final states) instead
  bool lastSteps = false;
  bool grad = false;
  c10::Device device{c10::kCPU};
  std::vector<Slot> slots;

  bool matches(const c10::List<std::optional<at::Tensor>> &args) const {
    if (torch::autograd::GradMode::is_enabled() != grad ||
        args.size() != slots.size())
      return false;
    for (size_t j = 0; j < slots.size(); ++j) {
      const Slot &slot = slots[j];
      std::optional<at::Tensor> given = args.get(j);
      bool passed = given.has_value() && given->defined();
      if (passed != slot.passed)
        return false;
      if (!passed)
        continue;
      const at::Tensor &t = *given;
      if (t.scalar_type() != slot.dtype || t.device() != device ||
          t.sizes() != at::IntArrayRef(slot.sizes) || !t.is_contiguous() ||
          (grad && t.requires_grad() != slot.requiresGrad))
        return false;
    }
    return true;
  }
};

/// Records the configuration of `example` (the tensors of the call being
/// recorded, in call order) for `target`: a kernel binding (`train` false;
/// `order`: which of its results a planned call returns) or a training
/// binding (`lastSteps`: its state results are sequences, of which a
/// planned call returns the last steps). Every passed tensor must be on
/// one device.
int64_t bindPlan(int64_t target, bool train, std::vector<int64_t> order,
                 const c10::List<std::optional<at::Tensor>> &example,
                 bool grad, bool lastSteps) {
  auto plan = std::make_shared<BoundPlan>();
  TORCH_CHECK(!lastSteps || train,
              "flexsn_native.bind_plan: last_steps is for a training plan");
  plan->lastSteps = lastSteps;
  if (train) {
    plan->training = lookup(trainings, target, "training");
    TORCH_CHECK(static_cast<int64_t>(example.size()) ==
                    plan->training->numLeaves,
                "flexsn_native.bind_plan: ", example.size(),
                " tensors for a training kernel of ",
                plan->training->numLeaves, " leaves");
  } else {
    plan->kernel = lookup(kernels, target, "kernel");
    for (int64_t i : order)
      TORCH_CHECK(i >= 0 &&
                      i < static_cast<int64_t>(plan->kernel->results.size()),
                  "flexsn_native.bind_plan: result index out of range");
    plan->order = std::move(order);
  }
  plan->grad = grad;
  bool first = true;
  for (size_t j = 0; j < example.size(); ++j) {
    std::optional<at::Tensor> given = example.get(j);
    BoundPlan::Slot slot;
    slot.passed = given.has_value() && given->defined();
    if (slot.passed) {
      const at::Tensor &t = *given;
      TORCH_CHECK(first || t.device() == plan->device,
                  "flexsn_native.bind_plan: tensors on ", plan->device,
                  " and ", t.device());
      plan->device = t.device();
      first = false;
      slot.dtype = t.scalar_type();
      slot.sizes = t.sizes().vec();
      slot.requiresGrad = grad && t.requires_grad();
    }
    plan->slots.push_back(std::move(slot));
  }
  TORCH_CHECK(!first && plan->slots[0].passed,
              "flexsn_native.bind_plan: the call's input #0 is missing");
  std::lock_guard<std::mutex> lock(registryMutex);
  plan->id = nextId++;
  int64_t id = plan->id;
  plans.emplace(id, std::move(plan));
  return id;
}

/// A call through plan `id`: its results (an inference kernel's in the
/// plan's order; a training node's outputs, then its state results, or
/// their last steps for a `lastSteps` plan: views that autograd tracks, as
/// `seq[-1]` in Python is), or none when the call does not match
/// the plan (the package then takes its general path).
std::vector<at::Tensor>
runPlan(int64_t id, const c10::List<std::optional<at::Tensor>> &args) {
  std::shared_ptr<const BoundPlan> plan = lookup(plans, id, "plan");
  if (!plan->matches(args))
    return {};
  if (plan->training) {
    std::vector<at::Tensor> results =
        train(plan->training, asTensors(args));
    if (plan->lastSteps)
      for (size_t i = plan->training->outputIndex.size(); i < results.size();
           ++i)
        results[i] = results[i].select(0, -1);
    return results;
  }
  std::vector<at::Tensor> results = run(*plan->kernel, asTensors(args));
  std::vector<at::Tensor> ordered;
  ordered.reserve(plan->order.size());
  for (int64_t i : plan->order)
    ordered.push_back(results[i]);
  return ordered;
}

} // namespace

TORCH_LIBRARY(flexsn_native, m) {
  m.def("trace(bool on) -> int[]", &trace);
  m.def("bind_plan(int target, bool train, int[] order, Tensor?[] example, "
        "bool grad, bool last_steps) -> int",
        &bindPlan);
  m.def("run_plan(int id, Tensor?[] args) -> Tensor[]", &runPlan);
  // The operators that take tensors have kernels per backend (CPU, CUDA)
  // and, `train`, per autograd key, so that the package's fake
  // implementations (flexsn/_fakes.py) serve torch.compile's tracing.
  // `recipe`: what binds `id` in a process that has not (see Recipes);
  // graphs carry it, eager calls pass none.
  m.def("launch(int id, Tensor?[] args, str recipe=\"\") -> Tensor[]");
  m.def("forward(int id, Tensor?[] leaves, str recipe=\"\") -> Tensor[]");
  m.def("recompute(int id, Tensor?[] leaves, Tensor? after, "
        "str recipe=\"\") -> Tensor[]");
  m.def("backward(int id, Tensor?[] args, SymInt[] seq_shape, "
        "str recipe=\"\") -> Tensor[]");
  m.def("train(int id, Tensor?[] leaves, str recipe=\"\") -> Tensor[]");
}

TORCH_LIBRARY_IMPL(flexsn_native, CPU, m) {
  m.impl("launch", &launchOp);
  m.impl("forward", &forwardOp);
  m.impl("recompute", &recomputeOp);
  m.impl("backward", &backwardOp);
}

TORCH_LIBRARY_IMPL(flexsn_native, CUDA, m) {
  m.impl("launch", &launchOp);
  m.impl("forward", &forwardOp);
  m.impl("recompute", &recomputeOp);
  m.impl("backward", &backwardOp);
}

TORCH_LIBRARY_IMPL(flexsn_native, Autograd, m) { m.impl("train", &trainOp); }

// Below the autograd keys (inference mode): the same node, which records
// nothing there.
TORCH_LIBRARY_IMPL(flexsn_native, CompositeExplicitAutograd, m) {
  m.impl("train", &trainOp);
}

// The package's entry points that take addresses, called by ctypes (never
// operators: see the head of this file). Each returns 0 (an id: > 0) on
// success, else -1 with a message in `error` (of `errorSize` bytes).
namespace {

template <typename Fn>
int64_t guarded(char *error, size_t errorSize, Fn fn) {
  try {
    return fn();
  } catch (const c10::Error &e) {
    std::snprintf(error, errorSize, "%s", e.what_without_backtrace());
  } catch (const std::exception &e) {
    std::snprintf(error, errorSize, "%s", e.what());
  }
  return -1;
}

} // namespace

extern "C" {

/// The functions of the libFlexSN.so the package loaded (launch, free,
/// program destroy) and PyTorch's current-stream getter (0: none).
int flexsn_torch_init(void *launch, void *free, void *destroy, void *create,
                      void *kernelGet, void *deviceInfo, void *pointer,
                      void *stream, char *error, size_t errorSize) {
  return guarded(error, errorSize, [&]() -> int64_t {
    TORCH_CHECK(launch && free && destroy && create && kernelGet,
                "a null function address");
    createFn.store(reinterpret_cast<CreateFn>(create));
    kernelGetFn.store(reinterpret_cast<KernelGetFn>(kernelGet));
    deviceInfoFn.store(reinterpret_cast<DeviceInfoFn>(deviceInfo));
    pointerFn.store(reinterpret_cast<PointerFn>(pointer));
    launchFn.store(reinterpret_cast<LaunchFn>(launch));
    freeFn.store(reinterpret_cast<FreeFn>(free));
    destroyFn.store(reinterpret_cast<DestroyFn>(destroy));
    streamFn.store(reinterpret_cast<StreamFn>(stream));
    return 0;
  });
}

/// The package takes over `program` (a libFlexSN program handle): it is
/// destroyed when the package drops it and no bound kernel of it remains.
int flexsn_torch_adopt_program(void *program, char *error, size_t errorSize) {
  return guarded(error, errorSize, [&]() -> int64_t {
    TORCH_CHECK(program, "a null program");
    std::lock_guard<std::mutex> lock(registryMutex);
    auto &ref = programs[program];
    TORCH_CHECK(!ref, "program already adopted");
    ref.reset(new ProgramRef{program});
    return 0;
  });
}

void flexsn_torch_drop_program(void *program) {
  std::shared_ptr<ProgramRef> ref;
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    auto it = programs.find(program);
    if (it == programs.end())
      return;
    ref = std::move(it->second);
    programs.erase(it);
  }
  // destroyed here, outside the lock, unless a binding still holds it
}

/// Binds `kernel` of the adopted `program`, named `name`, with
/// `numPointers` pointer arguments, on the CPU or CUDA device `device`, to
/// calls of `numArgs` tensors: per read (`numReads` rows of 5 in `reads`:
/// slot, position in the call, dtype code, shape code, optional) with its
/// name (`readNames`, one per line), per result (`numResults` rows of 3:
/// slot, dtype code, shape code). Returns its id: `wantedId` where given
/// (not 0), else a fresh one.
int64_t flexsn_torch_bind(void *program, void *kernel, const char *name,
                          int64_t numPointers, int cuda, int64_t device,
                          int64_t numArgs, const int64_t *reads,
                          int64_t numReads, const char *readNames,
                          const int64_t *results, int64_t numResults,
                          int64_t wantedId, char *error, size_t errorSize) {
  return guarded(error, errorSize, [&]() -> int64_t {
    TORCH_CHECK(kernel && name && readNames &&
                    (numReads == 0 || reads) && (numResults == 0 || results),
                "a null argument");
    TORCH_CHECK(numPointers >= 0 && numArgs >= 0 && numReads >= 0 &&
                    numResults >= 0 && device >= 0,
                "a negative count");
    auto bound = std::make_shared<BoundKernel>();
    bound->name = name;
    bound->kernel = kernel;
    bound->numPointers = static_cast<size_t>(numPointers);
    bound->cuda = cuda != 0;
    bound->device = device;
    bound->numArgs = numArgs;
    std::vector<bool> taken(numPointers, false);
    auto claimSlot = [&](int64_t slot) {
      TORCH_CHECK(slot >= 0 && slot < numPointers && !taken[slot],
                  "pointer slot ", slot, " out of range or bound twice");
      taken[slot] = true;
    };
    std::string names = readNames;
    size_t from = 0;
    for (int64_t i = 0; i < numReads; ++i) {
      const int64_t *row = reads + 5 * i;
      claimSlot(row[0]);
      TORCH_CHECK(row[1] >= 0 && row[1] < numArgs, "read position ", row[1],
                  " outside a call of ", numArgs, " tensors");
      size_t to = names.find('\n', from);
      std::string readName = names.substr(from, to - from);
      from = to == std::string::npos ? names.size() : to + 1;
      bound->reads.push_back({row[0], row[1], dtypeOfCode(row[2]),
                              shapeOfCode(row[3]), row[4] != 0,
                              std::move(readName)});
    }
    for (int64_t i = 0; i < numResults; ++i) {
      const int64_t *row = results + 3 * i;
      claimSlot(row[0]);
      bound->results.push_back(
          {row[0], dtypeOfCode(row[1]), shapeOfCode(row[2])});
    }
    std::lock_guard<std::mutex> lock(registryMutex);
    if (wantedId > 0 && kernels.count(wantedId))
      return wantedId; // an id derived from content names one binding
    auto it = programs.find(program);
    TORCH_CHECK(it != programs.end(), "the program was not adopted");
    bound->program = it->second;
    bound->id = claimId(wantedId);
    int64_t id = bound->id;
    kernels.emplace(id, std::move(bound));
    return id;
  });
}

/// Binds the training pair of kernel bindings `forward` and `backward`
/// (csrc's BoundTraining: the index lists, `counts` giving each list's
/// length in `values`, in the order output, state, kept, leaf-read, grad,
/// non-differentiable) under `wantedId`, with the recipe that binds it in
/// another process.
int64_t flexsn_torch_bind_train(int64_t forward, int64_t backward,
                                const int64_t *values, const int64_t *counts,
                                int recompute, int64_t wantedId,
                                const char *recipe, char *error,
                                size_t errorSize) {
  return guarded(error, errorSize, [&]() -> int64_t {
    TORCH_CHECK(values && counts && recipe, "a null argument");
    std::vector<int64_t> lists[6];
    const int64_t *at = values;
    for (int i = 0; i < 6; ++i) {
      TORCH_CHECK(counts[i] >= 0 && counts[i] <= (1 << 20), "a bad count");
      lists[i].assign(at, at + counts[i]);
      at += counts[i];
    }
    return bindTraining(forward, backward, std::move(lists[0]),
                        std::move(lists[1]), std::move(lists[2]),
                        std::move(lists[3]), std::move(lists[4]),
                        std::move(lists[5]), recompute != 0, wantedId,
                        recipe);
  });
}

/// Drops the binding `id` (a kernel, training or plan binding): what a
/// graph holds stays alive through its own references.
void flexsn_torch_release(int64_t id) { release(id); }

} // extern "C"
