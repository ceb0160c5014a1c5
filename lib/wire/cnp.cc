/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire/cnp.h"

namespace uroce::wire {

std::size_t cnp_frame_length(const RoceRoute& route) {
  return roce_frame_length(route, opcode_info(Opcode::kCnp), 0);
}

std::size_t build_cnp_frame(Bytes out, const RoceRoute& route, std::uint32_t dest_qp,
                            std::uint16_t ip_id) {
  Bth bth;
  bth.opcode = static_cast<std::uint8_t>(Opcode::kCnp);
  bth.becn = true;
  bth.dest_qp = dest_qp;
  return build_roce_frame(out, route, bth, ExtHeaders{}, ConstBytes{}, ip_id);
}

}  // namespace uroce::wire
