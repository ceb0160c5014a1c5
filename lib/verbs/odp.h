/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// On-demand paging (ODP) for a software device. A hardware NIC with ODP
// takes a page fault on a range the program never pinned and fails the
// access when the range is not mapped. uroce reads process memory
// directly, so for an ODP region it asks the kernel, before each copy,
// whether the range may be touched: with an implicit region a remote peer
// names any address of the process, and a plain memcpy there would end
// the program with SIGSEGV or SIGBUS.
//
// The check is madvise(MADV_POPULATE_READ or MADV_POPULATE_WRITE) on the
// range's pages (Linux 5.14). The kernel walks the real page tables,
// faults missing pages in as a device's page fault would, honours each
// mapping's protections (a write to a read-only or PROT_NONE page fails)
// and returns an error where an access would raise SIGSEGV or SIGBUS (a
// file mapping past its end), without touching a byte. It keeps no state,
// so it is never stale. Weighed and not taken: mincore(2) finds unmapped
// pages but neither PROT_NONE, read-only nor past-the-end mappings; a
// cached view of /proc/self/maps adds protections but goes stale at every
// munmap or mprotect the program makes, the very case that crashes;
// process_vm_readv/writev on the process itself can only prove a page
// writable by writing to it.
//
// Cost: one system call per lookup of an ODP region, about 0.5 us for the
// page or two of a packet and 90 ns per further page (measured on Linux
// 6.18). Pinned regions never reach it. Not covered: the program itself
// unmapping a range while an operation on it is in flight, a race the
// program owns with any DMA.

#include <cstdint>

namespace uroce::verbs::odp {

/// Whether the kernel offers the check (Linux 5.14 or later); without it
/// uroce offers no ODP.
bool available();

/// True when every byte of [addr, addr + length) is mapped and readable,
/// and writable too with `write`. Pages the kernel had not populated yet
/// are faulted in. `addr + length` must not wrap.
bool accessible(std::uintptr_t addr, std::uint64_t length, bool write);

}  // namespace uroce::verbs::odp
