// Loads an AOTInductor package (torch._inductor.aoti_compile_and_package)
// of a model with FlexSN kernels and runs it on one input, from C++ alone.
//
//   run_package <libFlexSNTorch.so> <model.pt2> <input.txt> [cuda]
//
// input.txt: the input's sizes on the first line, then its values. Prints
// the output's sizes, then its values (one per line, 9 significant
// digits).

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>

#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 4) {
    std::cerr << "usage: run_package <libFlexSNTorch.so> <model.pt2> "
                 "<input.txt> [cuda]\n";
    return 2;
  }
  // The operators register themselves when their library loads.
  if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
    std::cerr << "cannot load the operators: " << dlerror() << "\n";
    return 1;
  }
  std::ifstream file(argv[3]);
  std::string line;
  std::getline(file, line);
  std::vector<int64_t> sizes;
  std::istringstream header(line);
  for (int64_t s; header >> s;)
    sizes.push_back(s);
  std::vector<float> values;
  for (float v; file >> v;)
    values.push_back(v);
  torch::Tensor x = torch::from_blob(values.data(), sizes, torch::kFloat).clone();
  bool cuda = argc > 4 && std::string(argv[4]) == "cuda";
  if (cuda)
    x = x.to(torch::kCUDA);
  try {
    torch::inductor::AOTIModelPackageLoader loader(argv[2]);
    std::vector<torch::Tensor> outputs = loader.run({x});
    torch::Tensor y = outputs.at(0).to(torch::kCPU).contiguous();
    for (int64_t s : y.sizes())
      std::cout << s << " ";
    std::cout << "\n";
    const float *data = y.data_ptr<float>();
    for (int64_t i = 0; i < y.numel(); ++i)
      std::printf("%.9g\n", data[i]);
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
