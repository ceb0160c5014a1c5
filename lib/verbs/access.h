/* SPDX-License-Identifier: BSD-3-Clause */
#pragma once

// Access flags of regions, windows and QPs, with libibverbs' values
// (IBV_ACCESS_*; drivers/ibverbs checks them with static_asserts), and
// which of them each object takes. The transport enforces the first four
// (transport::access); the rest are hints a device may ignore, which
// never fail a registration (IBA 10.6.3.1, verbs.h).

namespace uroce::verbs::access {

inline constexpr unsigned kLocalWrite = 1;
inline constexpr unsigned kRemoteWrite = 2;
inline constexpr unsigned kRemoteRead = 4;
inline constexpr unsigned kRemoteAtomic = 8;
inline constexpr unsigned kMwBind = 16;
inline constexpr unsigned kZeroBased = 32;
inline constexpr unsigned kOnDemand = 64;
inline constexpr unsigned kHugetlb = 128;
inline constexpr unsigned kRelaxedOrdering = 1u << 20;  ///< IBV_ACCESS_RELAXED_ORDERING
inline constexpr unsigned kOptionalRange = 0x3FFu << 20;  ///< IBV_ACCESS_OPTIONAL_RANGE

/// What the transport enforces.
inline constexpr unsigned kEnforced = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;
/// What the MR table keeps of a region's flags: the enforced bits, and
/// whether windows may be bound to it (IBA C10-73).
inline constexpr unsigned kTableFlags = kEnforced | kMwBind;
/// Taken and honoured by what they mean to a software device: nothing.
inline constexpr unsigned kIgnored = kMwBind | kZeroBased | kHugetlb | kOptionalRange;
/// What a region of host memory may ask for.
inline constexpr unsigned kRegion = kEnforced | kIgnored | kOnDemand;
/// What a region on device memory may ask for (those of mlx5's MEMIC);
/// it is always zero-based: the memory has no address the program knows,
/// so offset 0 of the region is address 0 (libibverbs' cmd_dm.c).
inline constexpr unsigned kDmRegion = kEnforced | kZeroBased | kOptionalRange;
/// What a bind may give a window; a window honours the remote ones
/// (local write is its region's business). No zero-based windows.
inline constexpr unsigned kWindow = kEnforced;
/// What a QP's access flags may be. ON_DEMAND describes regions, not QPs,
/// but programs hand a region's flags to modify_qp (pyverbs' ODP tests
/// do) and the kernel's drivers ignore it: it is taken and dropped.
inline constexpr unsigned kQp = kEnforced | kOnDemand;

}  // namespace uroce::verbs::access
