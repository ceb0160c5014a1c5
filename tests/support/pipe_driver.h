/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// A port driver for tests (verbs/port_driver.h): a device whose port is
// "pipe:NAME" gets a PipePort in memory, and the two devices of one
// process that name the same pipe are joined back to back. Devices and
// programs then run whole (engine, ARP, QPs, frames), with no DPDK.

namespace uroce::test {

/// Registers the driver (once; later calls do nothing).
void register_pipe_driver();

}  // namespace uroce::test
