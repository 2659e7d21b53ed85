//===- manifest.cpp - Fuzz target: bundle manifests (model.json) ----------===//
//
// Any text as the model.json of a bundle, read and checked as moe-run reads
// it. readManifest takes a path, so the input goes through a temporary file.
// Of a manifest that passes, the byte size of every tensor is what moe-run
// computes next.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "Manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static moe_fuzz::TempFile file(".json");
  llvm::Expected<moe_run::Manifest> m =
      moe_run::readManifest(file.write(data, size));
  if (!m) {
    llvm::consumeError(m.takeError());
    return 0;
  }
  for (const auto *list : {&m->inputs, &m->outputs, &m->weights})
    for (const moe_run::TensorSpec &t : *list)
      (void)t.bytes();
  return 0;
}
