/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// The responder's state (rxe's resp.* and resp_res), which the block of
// a shared XRC target QP (SharedResponder, qp.h) holds for the processes
// of one host that serve it.
//
// An XRC domain opened on a file is shared by every process that opens the
// file (IBA A14.3; the kernel shares it by inode), and a target QP of the
// domain delivers each request to the SRQ its XRCETH names, whichever
// process made that SRQ. uroce executes a request in the process that owns
// its SRQ, since only that process can write the SRQ's buffers: each such
// process has a Qp of its own for the target QP (the same QPN), and the
// device daemon hands each request to the owner of the SRQ it names. What
// makes them one QP is this block, in memory they all map: the expected
// PSN, the MSN, the message in progress and the responder resources, so a
// request executes once, in PSN order, in whichever process receives it;
// the state and attributes the last Modify QP set, which every process
// adopts; and a lock that orders them.
//
// Everything here is trivially copyable and holds no pointer: another
// program could write anything here, and nothing here may make this one
// touch memory its own tables do not allow. A WRITE's destination, length
// and progress stay in the Qp that executed its first packet; the block
// says which one (its token), and a later packet of the message any other
// Qp receives is an invalid request.

#include <cstdint>
#include <optional>

#include "transport/events.h"
#include "transport/types.h"
#include "wire/psn.h"

namespace uroce::transport {

/// A responder resource (IBA 9.5, rxe's resp_res): an executed READ or
/// ATOMIC kept for duplicate requests.
struct ResponderResource {
  bool valid = false;
  bool is_read = true;
  wire::Psn first_psn;
  wire::Psn last_psn;
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint32_t length = 0;
  std::uint64_t orig_value = 0;  ///< ATOMIC: the value found
  std::uint32_t msn = 0;
  std::uint32_t busy = 0;      ///< response jobs still reading it
  std::uint32_t xrc_srqn = 0;  ///< XRC target: the SRQ whose memory a READ reads
};

/// The responder's progress through the request stream.
struct ResponderState {
  wire::Psn epsn;  ///< expected PSN
  std::uint32_t msn = 0;
  bool nak_sent = false;  ///< a sequence-error NAK is outstanding
  /// Both ends offer selective repeat: the responses say so.
  bool sr_peer = false;
  bool uc_drop = false;  ///< UC: dropping until the next FIRST/ONLY
  bool fatal = false;    ///< a NAK ends this QP once it is sent
  /// The asynchronous error the QP reports once it is ended, if any.
  std::optional<QpError> fatal_error;
  // The message in progress, if any.
  bool in_send = false;
  bool in_write = false;
  bool recv_taken = false;
  RecvWr recv;
  std::uint32_t recv_offset = 0;
  std::uint64_t write_token = 0;  ///< the Qp that began the WRITE in progress
  std::uint32_t since_ack = 0;
  std::uint32_t xrc_srqn = 0;  ///< XRC target: the SRQ of the message in progress
  std::uint32_t res_next = 0;  ///< the resource alloc_resource tries first
};

/// Serialises the processes sharing a SharedResponder: held around
/// everything a QP does with the block. Its owner makes it (lib/transport
/// has no threads of its own): a process-shared mutex in the block's
/// mapping, in the device.
class SharedResponderLock {
 public:
  virtual ~SharedResponderLock() = default;
  virtual void lock() = 0;
  virtual void unlock() = 0;
};

}  // namespace uroce::transport
