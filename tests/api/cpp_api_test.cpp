// <loom/loom.hpp>: the C++ interface over the C API alone, as the training
// layer and the bindings use it. Ownership (communicators and streams end
// with their objects), spans sized by the collective's rule, failures as
// loom::CallError carrying the result and the message.
#include <gtest/gtest.h>
#include <loom/loom.hpp>

#include <numeric>
#include <thread>
#include <vector>

namespace {

// Runs fn(rank, comm) for each rank on a thread of its own.
template <class Fn>
void onRanks(std::vector<loom::Comm>& comms, Fn fn) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) threads.emplace_back([&, r] { fn(static_cast<int>(r), comms[r]); });
  for (auto& t : threads) t.join();
}

TEST(CppApi, CollectivesTakeSpansAndComputeExactly) {
  auto comms = loom::Comm::all(3);
  onRanks(comms, [](int rank, loom::Comm& comm) {
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.size(), 3);
    std::vector<int32_t> in(6), out(6);
    std::iota(in.begin(), in.end(), rank * 10);
    comm.allReduce(std::span(in), std::span(out));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], 30 + 3 * i);

    std::vector<double> mine{static_cast<double>(rank)}, all(3);
    comm.allGather(std::span(mine), std::span(all));
    EXPECT_EQ(all, (std::vector<double>{0, 1, 2}));

    std::vector<float> blocks{1, 2, 3}, block(1);
    comm.reduceScatter(std::span(blocks), std::span(block), loomMax);
    EXPECT_EQ(block[0], static_cast<float>(rank + 1));

    std::vector<uint8_t> bytes(5, static_cast<uint8_t>(rank == 2 ? 7 : 0));
    comm.broadcast(std::span(bytes), 2);
    EXPECT_EQ(bytes, std::vector<uint8_t>(5, 7));

    std::vector<int64_t> toEach{rank * 3 + 0, rank * 3 + 1, rank * 3 + 2}, fromEach(3);
    comm.allToAll(std::span(toEach), std::span(fromEach));
    for (int p = 0; p < 3; ++p) EXPECT_EQ(fromEach[static_cast<size_t>(p)], p * 3 + rank);
  });
}

TEST(CppApi, StreamsAndGroupsOwnWhatTheyStart) {
  auto comms = loom::Comm::all(2);
  onRanks(comms, [](int rank, loom::Comm& comm) {
    loom::Stream stream;
    std::vector<float> x(1000, 1.0f);
    comm.allReduce(std::span(x), loomSum, &stream);  // returns at once
    stream.synchronize();
    EXPECT_EQ(x[999], 2.0f);

    std::vector<int32_t> out{rank}, in{-1};
    loom::Group group;  // a ring exchange cannot deadlock inside one group
    comm.send(std::span(out), 1 - rank);
    comm.recv(std::span(in), 1 - rank);
    group.end();
    EXPECT_EQ(in[0], 1 - rank);
  });
}

TEST(CppApi, WrongSizesAndBadArgumentsThrowNamingThem) {
  auto comms = loom::Comm::all(1);
  std::vector<float> a(4), b(3);
  try {
    comms[0].allReduce(std::span(a), std::span(b));
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("allReduce: recv has 3 elements where 4 are needed"), std::string::npos);
  }
  EXPECT_THROW(comms[0].allGather(std::span(a), std::span(b)), std::invalid_argument);
  try {
    comms[0].broadcast(std::span(a), 5);
    ADD_FAILURE() << "no exception";
  } catch (const loom::CallError& e) {
    EXPECT_EQ(e.result(), loomInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("root=5"), std::string::npos) << e.what();
  }
  // Where no CUDA device is visible (CI), a rank has none, and says so; where
  // one is, the rank was created on it.
  try {
    EXPECT_GE(comms[0].cudaDevice(), 0);
  } catch (const loom::CallError& e) {
    EXPECT_EQ(e.result(), loomInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
  loom::Comm moved = std::move(comms[0]);  // ownership moves; the old object holds nothing
  EXPECT_FALSE(comms[0]);
  EXPECT_TRUE(moved);
  EXPECT_EQ(moved.asyncError(), loomSuccess);
}

// A Window registers its buffer on every rank and deregisters with the
// object; moved, the new owner deregisters once; a size that differs between
// ranks throws CallError on every rank, naming loomInvalidArgument.
TEST(CppApi, WindowsRegisterAndDeregisterWithTheirObjects) {
  auto comms = loom::Comm::all(2);
  onRanks(comms, [](int rank, loom::Comm& comm) {
    std::vector<float> buffer(1024, static_cast<float>(rank + 1)), out(1024);
    {
      loom::Window window(comm, std::span(buffer));
      EXPECT_TRUE(window);
      EXPECT_EQ(window.data(), buffer.data());
      loom::Window moved(std::move(window));
      EXPECT_FALSE(window);
      comm.allReduce(std::span(buffer), std::span(out));
      EXPECT_EQ(out[1023], 3.0f);
      loom::Window early(comm, std::span(out));
      early.deregister();
      EXPECT_FALSE(early);
    }  // `moved` deregisters here, on both ranks
    std::vector<float> odd(rank == 0 ? 1024 : 1000);
    try {
      loom::Window mismatched(comm, std::span(odd));
      ADD_FAILURE() << "rank " << rank << ": windows of different sizes were registered";
    } catch (const loom::CallError& e) {
      EXPECT_EQ(e.result(), loomInvalidArgument) << e.what();
    }
    loom::Window again(comm, std::span(buffer));  // the failed one left nothing behind
    EXPECT_EQ(again.data(), buffer.data());
  });
}

}  // namespace
