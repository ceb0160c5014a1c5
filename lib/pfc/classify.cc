/* SPDX-License-Identifier: BSD-3-Clause */
#include "pfc/classify.h"

namespace uroce::pfc {

std::uint8_t frame_priority(const wire::FrameClass& c) {
  if (c.tagged) return c.pcp;
  return c.ip() ? dscp_priority(c.dscp()) : 0;
}

}  // namespace uroce::pfc
