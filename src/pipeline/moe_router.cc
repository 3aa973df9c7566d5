#include "pipeline/moe_router.h"

#include <fmt/format.h>

#include "router/dispatch.h"
#include "spec/router_spec.h"

namespace sc {

bool resolve_moe_router(PipelineSpec& spec, Diagnostics& diags) {
  if (!spec.composition || !spec.composition->moe || spec.composition->moe->router.empty()) return true;
  Composition& c = *spec.composition;
  MoeSpec& m = *c.moe;
  auto router = load_router_spec(m.router, diags);
  if (!router) {
    diags.error(m.router_loc, fmt::format("moe.router: '{}' is not a router spec that loads (its errors are above)", m.router));
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
