/* SPDX-License-Identifier: BSD-3-Clause */
// The verbs object model's rules (lib/verbs: pd, mr, cq, srq, ah, dm,
// queue_pair), on a device whose port is in memory: objects in use are
// not destroyed (EBUSY), objects of two contexts are not mixed (EINVAL),
// sizes beyond the device's are refused, imports stand for originals.

#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "support/pipe_port.h"
#include "verbs/access.h"
#include "verbs/ah.h"
#include "verbs/completion_channel.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/dm.h"
#include "verbs/mr.h"
#include "verbs/pd.h"
#include "verbs/queue_pair.h"
#include "verbs/srq.h"

namespace uroce::verbs {
namespace {

class ObjectModel : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceConfig dc;
    dc.name = "uroce-om";
    dc.port = "pipe:object-model";
    dc.ip = {IpPrefix{"10.79.0.1", 24}};
    std::string err;
    dev_ = Device::open(dc, Config{},
                        std::make_unique<test::PipePort>(wire::MacAddr{{2, 0, 0, 0, 0x79, 1}}),
                        &err);
    ASSERT_TRUE(dev_) << err;
    ctx_ = std::make_unique<Context>(*dev_, nullptr);
    other_ = std::make_unique<Context>(*dev_, nullptr);
    pd_ = Pd::create(*ctx_);
    ASSERT_EQ(Cq::create(*ctx_, 64, nullptr, 0, &cq_), 0);
  }
  void TearDown() override {
    cq_.reset();
    pd_.reset();
    EXPECT_FALSE(ctx_->busy()) << "every object of the context is gone";
  }

  int make_qp(std::unique_ptr<QueuePair>* out, Srq* srq = nullptr, Cq* cq = nullptr) {
    QpCaps caps;
    caps.max_send_wr = caps.max_recv_wr = 16;
    caps.max_send_sge = caps.max_recv_sge = 1;
    return QueuePair::create(*pd_, caps, cq ? *cq : *cq_, cq ? *cq : *cq_, srq, out);
  }

  std::unique_ptr<Device> dev_;
  std::unique_ptr<Context> ctx_, other_;
  std::unique_ptr<Pd> pd_;
  std::unique_ptr<Cq> cq_;
  std::vector<std::uint8_t> buf_ = std::vector<std::uint8_t>(4096);
};

TEST_F(ObjectModel, ObjectsInUseAreNotDestroyed) {
  std::unique_ptr<Mr> mr;
  ASSERT_EQ(Mr::reg(*pd_, buf_.data(), buf_.size(), 0, access::kLocalWrite, &mr), 0);
  EXPECT_EQ(Pd::destroy(pd_), EBUSY) << "a region uses the PD";
  ASSERT_TRUE(pd_);
  std::unique_ptr<Srq> srq;
  ASSERT_EQ(Srq::create(*pd_, 16, 1, 0, &srq), 0);
  std::unique_ptr<QueuePair> qp;
  ASSERT_EQ(make_qp(&qp, srq.get()), 0);
  EXPECT_EQ(Cq::destroy(cq_), EBUSY) << "a QP completes into it";
  EXPECT_EQ(Srq::destroy(srq), EBUSY) << "a QP receives from it";
  QueuePair::destroy(qp);
  EXPECT_EQ(Srq::destroy(srq), 0);
  EXPECT_EQ(Mr::destroy(mr), 0);
  EXPECT_EQ(Pd::destroy(pd_), 0);
  EXPECT_FALSE(pd_);
}

TEST_F(ObjectModel, ChannelsDevicesMemoryAndThreadDomainsCountTheirUsers) {
  std::unique_ptr<CompletionChannel> ch;
  ASSERT_EQ(CompletionChannel::create(*ctx_, &ch), 0);
  std::unique_ptr<Cq> cq;
  ASSERT_EQ(Cq::create(*ctx_, 8, ch.get(), 0, &cq), 0);
  EXPECT_EQ(CompletionChannel::destroy(ch), EBUSY);
  EXPECT_EQ(Cq::destroy(cq), 0);
  EXPECT_EQ(CompletionChannel::destroy(ch), 0);

  std::unique_ptr<Dm> dm;
  ASSERT_EQ(Dm::alloc(*ctx_, 4096, 0, &dm), 0);
  std::unique_ptr<Mr> mr;
  ASSERT_EQ(Mr::reg_dm(*pd_, *dm, 0, 4096, access::kZeroBased | access::kRemoteRead, &mr), 0);
  EXPECT_EQ(Dm::destroy(dm), EBUSY) << "a region covers it";
  EXPECT_EQ(Mr::destroy(mr), 0);
  EXPECT_EQ(Dm::destroy(dm), 0);

  std::unique_ptr<Td> td = Td::create(*ctx_);
  std::unique_ptr<Pd> parent;
  ASSERT_EQ(Pd::create_parent(*ctx_, *pd_, td.get(), &parent), 0);
  EXPECT_TRUE(parent->is_parent_domain());
  EXPECT_EQ(parent->id(), pd_->id()) << "the protection of the PD under it";
  EXPECT_EQ(Td::destroy(td), EBUSY);
  EXPECT_EQ(Pd::destroy(pd_), EBUSY);
  std::unique_ptr<Pd> nested;
  EXPECT_EQ(Pd::create_parent(*ctx_, *parent, nullptr, &nested), EINVAL)
      << "a parent domain's PD is a protection domain";
  EXPECT_EQ(Pd::destroy(parent), 0);
  EXPECT_EQ(Td::destroy(td), 0);
}

TEST_F(ObjectModel, ObjectsOfTwoContextsDoNotMix) {
  std::unique_ptr<Cq> theirs;
  ASSERT_EQ(Cq::create(*other_, 8, nullptr, 0, &theirs), 0);
  std::unique_ptr<QueuePair> qp;
  EXPECT_EQ(make_qp(&qp, nullptr, theirs.get()), EINVAL);
  std::unique_ptr<CompletionChannel> ch;
  ASSERT_EQ(CompletionChannel::create(*other_, &ch), 0);
  std::unique_ptr<Cq> cq;
  EXPECT_EQ(Cq::create(*ctx_, 8, ch.get(), 0, &cq), EINVAL);
  std::unique_ptr<Dm> dm;
  ASSERT_EQ(Dm::alloc(*other_, 64, 0, &dm), 0);
  std::unique_ptr<Mr> mr;
  EXPECT_EQ(Mr::reg_dm(*pd_, *dm, 0, 64, access::kZeroBased, &mr), EINVAL);
  theirs.reset();
  ch.reset();
  dm.reset();
  EXPECT_FALSE(other_->busy());
}

TEST_F(ObjectModel, SizesBeyondTheDevicesAreRefused) {
  std::unique_ptr<Cq> cq;
  EXPECT_EQ(Cq::create(*ctx_, 0, nullptr, 0, &cq), EINVAL);
  EXPECT_EQ(Cq::create(*ctx_, kMaxCqe + 1, nullptr, 0, &cq), EINVAL);
  EXPECT_EQ(Cq::create(*ctx_, 8, nullptr, kNumCompVectors, &cq), EINVAL);
  std::unique_ptr<Srq> srq;
  EXPECT_EQ(Srq::create(*pd_, 0, 1, 0, &srq), EINVAL);
  EXPECT_EQ(Srq::create(*pd_, 16, transport::kMaxSge + 1, 0, &srq), EINVAL);
  EXPECT_EQ(Srq::create(*pd_, 16, 1, 17, &srq), EINVAL) << "the limit is at most max_wr";
  ASSERT_EQ(Srq::create(*pd_, 16, 1, 16, &srq), 0);
  EXPECT_EQ(srq->modify(srq_attr::kLimit, 0, 17), EINVAL);
  EXPECT_EQ(srq->modify(srq_attr::kMaxWr, 32, 0), EOPNOTSUPP);
  EXPECT_EQ(srq->modify(srq_attr::kLimit, 0, 4), 0);
  EXPECT_EQ(srq->limit(), 4u);
  std::unique_ptr<QueuePair> qp;
  QpCaps caps;
  caps.max_send_wr = transport::kMaxQpWr + 1;
  EXPECT_EQ(QueuePair::create(*pd_, caps, *cq_, *cq_, nullptr, &qp), EINVAL);
  caps = {};
  caps.max_inline_data = transport::kMaxInlineData + 1;
  EXPECT_EQ(QueuePair::create(*pd_, caps, *cq_, *cq_, nullptr, &qp), EINVAL);
  caps = {};
  caps.type = static_cast<transport::QpType>(9);
  EXPECT_EQ(QueuePair::create(*pd_, caps, *cq_, *cq_, nullptr, &qp), EOPNOTSUPP);
}

TEST_F(ObjectModel, RegionsTakeTheAccessRegionsMayHave) {
  std::unique_ptr<Mr> mr;
  EXPECT_EQ(Mr::reg(*pd_, buf_.data(), 0, 0, access::kLocalWrite, &mr), EINVAL) << "empty";
  EXPECT_EQ(Mr::reg(*pd_, nullptr, 64, 0, access::kLocalWrite, &mr), EINVAL) << "no memory";
  EXPECT_EQ(Mr::reg(*pd_, buf_.data(), 64, 0, 1u << 12, &mr), EINVAL) << "unknown bits";
  EXPECT_EQ(Mr::reg(*pd_, buf_.data(), 64, 0, access::kRemoteWrite, &mr), EINVAL)
      << "remote write without local write (IBA 10.6.3.1)";
  // Hints are taken and ignored.
  ASSERT_EQ(Mr::reg(*pd_, buf_.data(), 64, 0,
                    access::kLocalWrite | access::kRelaxedOrdering | access::kHugetlb, &mr),
            0);
  EXPECT_NE(mr->lkey(), 0u);
  // A rereg's argument checks come before anything changes.
  EXPECT_EQ(mr->check_rereg(rereg::kChangeTranslation, nullptr, nullptr, 0, 0), EINVAL);
  EXPECT_EQ(mr->check_rereg(0, nullptr, nullptr, 0, access::kLocalWrite), EINVAL)
      << "access without kChangeAccess";
  std::unique_ptr<Pd> theirs = Pd::create(*other_);
  EXPECT_EQ(mr->check_rereg(rereg::kChangePd, theirs.get(), nullptr, 0, 0), EINVAL);
  std::unique_ptr<Pd> mine = Pd::create(*ctx_);
  ASSERT_EQ(mr->check_rereg(rereg::kChangePd, mine.get(), nullptr, 0, 0), 0);
  ASSERT_EQ(mr->rereg(rereg::kChangePd, mine.get(), nullptr, 0, 0), 0);
  EXPECT_EQ(&mr->pd(), mine.get());
  EXPECT_EQ(Pd::destroy(mine), EBUSY) << "the region moved to it";
  EXPECT_EQ(Mr::destroy(mr), 0);
}

TEST_F(ObjectModel, ImportsStandForTheirOriginals) {
  std::unique_ptr<Pd> imported;
  EXPECT_EQ(dev_->with_pd(pd_->id(), [&](Pd* p) { return p ? Pd::import(*other_, *p, &imported)
                                                           : ENOENT; }),
            0);
  ASSERT_TRUE(imported);
  EXPECT_TRUE(imported->imported());
  EXPECT_EQ(imported->id(), pd_->id());
  EXPECT_EQ(Pd::destroy(pd_), EBUSY) << "the original stays while it is imported";
  std::unique_ptr<Mr> mr;
  ASSERT_EQ(Mr::reg(*pd_, buf_.data(), 64, 0, access::kLocalWrite, &mr), 0);
  std::unique_ptr<Mr> mr_import;
  EXPECT_EQ(dev_->with_mr(mr->lkey(), [&](Mr* m) { return Mr::import(*imported, *m, &mr_import); }),
            0);
  ASSERT_TRUE(mr_import);
  EXPECT_EQ(mr_import->rkey(), mr->rkey());
  std::unique_ptr<Pd> stranger = Pd::create(*other_);
  std::unique_ptr<Mr> refused;
  EXPECT_EQ(Mr::import(*stranger, *mr, &refused), EINVAL) << "another protection domain";
  Mr::unimport(mr_import);
  EXPECT_EQ(Mr::destroy(mr), 0) << "the registration was the original's";
  EXPECT_EQ(dev_->with_pd(0xFFFFFF, [](Pd* p) { return p ? 0 : ENOENT; }), ENOENT);
  stranger.reset();
  imported.reset();
}

TEST_F(ObjectModel, AnImportEndedWhileInUseGoesWithItsLastUser) {
  // pyverbs' shared-PD tests unimport the PD before destroying the QP
  // made in it, which the kernel allows.
  std::unique_ptr<Pd> imported;
  ASSERT_EQ(Pd::import(*other_, *pd_, &imported), 0);
  std::unique_ptr<Cq> cq;
  ASSERT_EQ(Cq::create(*other_, 8, nullptr, 0, &cq), 0);
  Pd* const raw = imported.get();
  QpCaps caps;
  std::unique_ptr<QueuePair> qp;
  ASSERT_EQ(QueuePair::create(*raw, caps, *cq, *cq, nullptr, &qp), 0);
  Pd::unimport(imported);
  EXPECT_FALSE(imported);
  EXPECT_EQ(Pd::destroy(pd_), EBUSY) << "the import still stands for it";
  EXPECT_EQ(qp->pd(), raw) << "the QP's PD lives on";
  QueuePair::destroy(qp);  // the last user: the import goes with it
  cq.reset();
  EXPECT_FALSE(other_->busy());
  EXPECT_EQ(Pd::destroy(pd_), 0);
}

TEST_F(ObjectModel, AnAddressWithoutAGrhOrOnAnotherPortIsRefused) {
  std::unique_ptr<Mr> mr;  // a use of the PD, which the refusals must leave alone
  ASSERT_EQ(Mr::reg(*pd_, buf_.data(), 64, 0, access::kLocalWrite, &mr), 0);
  AddressVector av;
  av.dgid = wire::IpAddr::from_v4(0x0A4F0002).bytes;
  std::unique_ptr<Ah> ah;
  av.has_grh = false;
  EXPECT_EQ(Ah::create(*pd_, av, &ah), EINVAL);
  av.has_grh = true;
  av.port_num = 2;
  EXPECT_EQ(Ah::create(*pd_, av, &ah), EINVAL);
  av.port_num = 1;
  av.sgid_index = kGidTableLen;
  EXPECT_EQ(Ah::create(*pd_, av, &ah), EINVAL);
  av.sgid_index = 0;  // the link-local GID (IPv6) toward an IPv4 address
  EXPECT_EQ(Ah::create(*pd_, av, &ah), EINVAL);
  // Expect: the PD's uses are what they were: the region's alone.
  EXPECT_EQ(Pd::destroy(pd_), EBUSY);
  EXPECT_EQ(Mr::destroy(mr), 0);
  EXPECT_EQ(Pd::destroy(pd_), 0);
}

TEST_F(ObjectModel, ModifyChecksWhatTheVerbsCheck) {
  std::unique_ptr<QueuePair> qp;
  ASSERT_EQ(make_qp(&qp), 0);
  namespace am = transport::attr_mask;
  QpModify m;
  m.attr.qp_state = transport::QpState::kInit;
  m.port_num = 2;
  EXPECT_EQ(qp->modify(m, am::kState | am::kPort), EINVAL);
  m.port_num = 1;
  m.pkey_index = 1;
  EXPECT_EQ(qp->modify(m, am::kState | am::kPkeyIndex), EINVAL);
  m.pkey_index = 0;
  m.cur_state = transport::QpState::kRts;
  EXPECT_EQ(qp->modify(m, am::kState | am::kCurState), EINVAL) << "it is in RESET";
  m.attr.qp_access_flags = access::kMwBind;
  EXPECT_EQ(qp->modify(m, am::kState | am::kAccessFlags), EINVAL);
  EXPECT_EQ(qp->modify(m, am::kState | am::kCap), EINVAL) << "no resizing";
  m.attr.qp_access_flags = access::kRemoteWrite | access::kOnDemand;
  ASSERT_EQ(qp->modify(m, am::kState | am::kPort | am::kPkeyIndex | am::kAccessFlags), 0);
  EXPECT_EQ(qp->qp().state(), transport::QpState::kInit);
  EXPECT_EQ(qp->qp().attr().qp_access_flags, access::kRemoteWrite)
      << "ON_DEMAND describes regions: taken and dropped";
}

}  // namespace
}  // namespace uroce::verbs
