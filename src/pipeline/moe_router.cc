#include "pipeline/moe_router.h"

#include <fmt/format.h>

#include "router/dispatch.h"
#include "spec/router_spec.h"

namespace sc {

bool resolve_moe_router(PipelineSpec& spec, Diagnostics& diags) {
  if (!spec.composition || !spec.composition->moe) return true;
  Composition& c = *spec.composition;
  MoeSpec& m = *c.moe;
  if (!m.layers_per_stage.empty() && static_cast<int64_t>(m.layers_per_stage.size()) != spec.stages) {
    diags.error(m.loc, fmt::format("moe.layers lists {} value{} but the schedule has {} stage{}; give one per stage or a "
                                   "single number for every stage",
                                   m.layers_per_stage.size(), m.layers_per_stage.size() == 1 ? "" : "s", spec.stages,
                                   spec.stages == 1 ? "" : "s"));
    return false;
  }
  if (m.router.empty()) return true;
  auto router = load_router_spec(m.router, diags);
  if (!router) {
    diags.error(m.router_loc, fmt::format("moe.router: '{}' is not a router spec that loads (its errors are listed with this one)", m.router));
    return false;
  }
  if (!router->dispatch.given) {
    diags.error(m.router_loc, fmt::format("moe.router: '{}' has no dispatch: section (ep_size, hidden, dtype), so it "
                                          "gives no all-to-all size; add one or give moe.dispatch_bytes",
                                          m.router));
    return false;
  }
  if (router->dispatch.ep_size != c.ep) {
    diags.error(m.router_loc, fmt::format("moe.router: '{}' dispatches over ep_size {} but mesh.ep is {}; they must "
                                          "be the same expert-parallel group",
                                          m.router, router->dispatch.ep_size, c.ep));
    return false;
  }
  m.dispatch_bytes = dispatch_worst_case(router->train, router->dispatch).buffer_bytes;
  return true;
}

}  // namespace sc
