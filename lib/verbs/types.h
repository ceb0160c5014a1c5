/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The vocabulary of the verbs surface: work requests, completions, QP
// attributes and their flags. They are the transport's own types
// (transport/types.h, transport/qp.h), under the verbs layer's names, so
// that the front ends (drivers/ibverbs, lib/api) speak to lib/verbs alone.

#include "transport/limits.h"
#include "transport/qp.h"
#include "transport/types.h"

namespace uroce::verbs {

using transport::MwBind;
using transport::QpAttr;
using transport::QpState;
using transport::QpType;
using transport::RecvWr;
using transport::SendWr;
using transport::Sge;
using transport::Wc;
using transport::WcOpcode;
using transport::WcStatus;
using transport::WrOpcode;
namespace attr_mask = transport::attr_mask;
namespace send_flags = transport::send_flags;
namespace wc_flags = transport::wc_flags;

}  // namespace uroce::verbs
