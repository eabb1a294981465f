#include "cli/gemm_sharing.h"

#include <string>

namespace dpv::cli {

LaunchedGemmChoices::LaunchedGemmChoices(dist::DistSession& session)
    : sharing_(
          session.env().rank,
          [&session](const std::string& key, const std::string& value) {
            session.store().set(key, dist::to_bytes(value));
          },
          [&session](const std::string& key) { return dist::to_string(session.store().get(key)); }) {
  install_cpu_gemm_sharing(&sharing_);
}

LaunchedGemmChoices::~LaunchedGemmChoices() { install_cpu_gemm_sharing(nullptr); }

}  // namespace dpv::cli
