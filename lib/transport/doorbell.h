/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The doorbell: how a QP tells whoever runs it (the engine) that it was
// given work from outside the engine's loop, a WR posted or its state
// changed, as a program rings a NIC's doorbell register after writing a
// WQE. The engine then looks at that QP alone, never at every QP.

namespace uroce::transport {

class Qp;

class Doorbell {
 public:
  virtual ~Doorbell() = default;
  /// `qp` has work to look at. Any thread; rung once until the engine
  /// answers (Qp::answer_doorbell).
  virtual void ring(Qp& qp) = 0;
};

}  // namespace uroce::transport
