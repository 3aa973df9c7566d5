// MoE layers of a composed spec sized from a router spec's dispatch worst case.
#pragma once

#include "spec/pipeline_spec.h"
#include "support/diagnostics.h"

namespace sc {

/// When the composed spec's `moe.router` names a router spec, loads it and sets
/// `moe.dispatch_bytes` to the dispatch worst case of one microbatch on one expert-parallel rank
/// (router/dispatch.h: DispatchResult::buffer_bytes, the bytes one rank can receive). The router
/// spec's `dispatch:` must be given and its `ep_size` must equal the mesh's `ep`; otherwise, or
/// when the router spec does not load, errors go to `diags` located at the `moe.router` value
/// (and the router spec's own errors at their lines). Returns false on any error; a spec
/// without `moe.router` is left as it is. Also checks that a `moe.layers` list has one entry
/// per stage of the (resolved) schedule, with the error at the `moe` key.
bool resolve_moe_router(PipelineSpec& spec, Diagnostics& diags);

}  // namespace sc
