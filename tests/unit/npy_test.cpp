// Tests for apps/common/npy: round trips, headers as numpy writes them, and
// refusal of malformed or hostile files with a message naming file and fault.
#include "common/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using kite::apps::NpyArray;
using kite::apps::read_npy;
using kite::apps::write_npy;

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name)
      if (c == '/') c = '_';
    dir_ = std::filesystem::temp_directory_path() /
           ("kite_npy_test_" + std::to_string(::getpid()) + "_" + name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& file) const { return (dir_ / file).string(); }

  static void write_bytes(const std::string& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good());
  }

  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // A version 1.0 (or 2.0) file with the given header dict text and data.
  static std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
    const size_t len_bytes = major == 1 ? 2 : 4;
    std::string header = dict;
    const size_t unpadded = 8 + len_bytes + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header.push_back('\n');
    std::string out("\x93NUMPY", 6);
    out.push_back(static_cast<char>(major));
    out.push_back('\0');
    for (size_t i = 0; i < len_bytes; ++i)
      out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
    return out + header + data;
  }

  // Reads bytes written to a file; expects failure with a message that
  // names the file and contains `expected`.
  void expect_rejected(const std::string& bytes, const std::string& expected) {
    const std::string p = path("bad.npy");
    write_bytes(p, bytes);
    NpyArray array;
    std::string err;
    EXPECT_FALSE(read_npy(p, &array, &err));
    EXPECT_NE(err.find(p), std::string::npos) << err;
    EXPECT_NE(err.find(expected), std::string::npos) << "message: " << err;
  }

  std::filesystem::path dir_;
};

std::vector<uint8_t> pattern_bytes(size_t n, bool as_bool) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = as_bool ? static_cast<uint8_t>(i % 3 == 0) : static_cast<uint8_t>(i * 37 + 11);
  return v;
}

// ---- round trips ----------------------------------------------------------

struct DtypeCase {
  kite_dtype dtype;
  const char* descr;
  size_t itemsize;
  const char* name;  // test name suffix
};

class NpyRoundTrip : public NpyTest, public ::testing::WithParamInterface<DtypeCase> {};

TEST_P(NpyRoundTrip, WritesNumpyHeaderAndReadsBack) {
  const DtypeCase c = GetParam();
  NpyArray in;
  in.dtype = c.dtype;
  in.shape = {2, 3, 5};
  in.data = pattern_bytes(30 * c.itemsize, c.dtype == KITE_DTYPE_BOOL);
  const std::string p = path("a.npy");
  std::string err;
  ASSERT_TRUE(write_npy(p, in, &err)) << err;

  // The header is exactly what numpy writes, and data starts 64-aligned.
  const std::string bytes = read_bytes(p);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(bytes[10 + header_len - 1], '\n');
  const std::string expected_dict = std::string("{'descr': '") + c.descr +
                                    "', 'fortran_order': False, 'shape': (2, 3, 5), }";
  EXPECT_EQ(bytes.substr(10, expected_dict.size()), expected_dict);
  EXPECT_EQ(bytes.size(), 10 + header_len + in.data.size());

  NpyArray out;
  ASSERT_TRUE(read_npy(p, &out, &err)) << err;
  EXPECT_EQ(out.dtype, c.dtype);
  EXPECT_EQ(out.shape, in.shape);
  EXPECT_EQ(out.data, in.data);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, NpyRoundTrip,
                         ::testing::Values(DtypeCase{KITE_DTYPE_FLOAT32, "<f4", 4, "float32"},
                                           DtypeCase{KITE_DTYPE_FLOAT16, "<f2", 2, "float16"},
                                           DtypeCase{KITE_DTYPE_INT64, "<i8", 8, "int64"},
                                           DtypeCase{KITE_DTYPE_INT32, "<i4", 4, "int32"},
                                           DtypeCase{KITE_DTYPE_BOOL, "|b1", 1, "bool"},
                                           DtypeCase{KITE_DTYPE_UINT8, "|u1", 1, "uint8"},
                                           DtypeCase{KITE_DTYPE_INT8, "|i1", 1, "int8"}),
                         [](const ::testing::TestParamInfo<DtypeCase>& info) {
                           return std::string(info.param.name);
                         });

TEST_F(NpyTest, RoundTripsScalarOneDimAndEmpty) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {7}, {0}, {3, 0, 2}};
  for (const auto& shape : shapes) {
    NpyArray in;
    in.dtype = KITE_DTYPE_FLOAT32;
    in.shape = shape;
    int64_t count = 0;
    ASSERT_TRUE(kite::apps::npy_element_count(shape, &count));
    in.data = pattern_bytes(static_cast<size_t>(count) * 4, false);
    const std::string p = path("s.npy");
    std::string err;
    ASSERT_TRUE(write_npy(p, in, &err)) << err;
    NpyArray out;
    ASSERT_TRUE(read_npy(p, &out, &err)) << err;
    EXPECT_EQ(out.shape, shape);
    EXPECT_EQ(out.data, in.data);
  }
  // numpy's spelling of a 1-d shape has a trailing comma.
  EXPECT_NE(read_bytes(path("s.npy")).find("'shape': (3, 0, 2), }"), std::string::npos);
}

TEST_F(NpyTest, ReadsVersion2HeaderAndOtherSpellings) {
  std::string data(2 * 4, '\0');
  const int32_t values[2] = {-5, 123456};
  std::memcpy(&data[0], values, sizeof(values));
  // Version 2.0 (4-byte header length), double quotes, keys in another order,
  // no trailing comma, extra whitespace.
  const std::string p = path("v2.npy");
  write_bytes(p, npy_file("{ \"shape\" : ( 2 , ) ,\"descr\":\"<i4\",'fortran_order':False}",
                          data, 2));
  NpyArray out;
  std::string err;
  ASSERT_TRUE(read_npy(p, &out, &err)) << err;
  EXPECT_EQ(out.dtype, KITE_DTYPE_INT32);
  EXPECT_EQ(out.shape, std::vector<int64_t>{2});
  ASSERT_EQ(out.data.size(), 8u);
  int32_t back[2];
  std::memcpy(back, out.data.data(), 8);
  EXPECT_EQ(back[0], -5);
  EXPECT_EQ(back[1], 123456);
}

TEST_F(NpyTest, ReadsSingleByteDtypesWithAnyByteOrderMark) {
  const std::string p = path("u8.npy");
  write_bytes(p, npy_file("{'descr': '<u1', 'fortran_order': False, 'shape': (3,), }",
                          std::string("\x01\x02\xff", 3)));
  NpyArray out;
  std::string err;
  ASSERT_TRUE(read_npy(p, &out, &err)) << err;
  EXPECT_EQ(out.dtype, KITE_DTYPE_UINT8);
  EXPECT_EQ(out.data, (std::vector<uint8_t>{1, 2, 255}));
}

// ---- rejections -------------------------------------------------------------

const char kGoodDict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
const std::string kGoodData(16, '\0');

TEST_F(NpyTest, AcceptsTheReferenceFileUsedByTheRejectionTests) {
  const std::string p = path("good.npy");
  write_bytes(p, npy_file(kGoodDict, kGoodData));
  NpyArray out;
  std::string err;
  EXPECT_TRUE(read_npy(p, &out, &err)) << err;
}

TEST_F(NpyTest, RejectsBadMagic) {
  std::string bytes = npy_file(kGoodDict, kGoodData);
  bytes[1] = 'M';
  expect_rejected(bytes, "bad magic");
  expect_rejected("", "bad magic");
  expect_rejected("PK\x03\x04 not numpy at all", "bad magic");
}

TEST_F(NpyTest, RejectsTruncatedData) {
  const std::string bytes = npy_file(kGoodDict, kGoodData);
  expect_rejected(bytes.substr(0, bytes.size() - 1), "truncated");
}

TEST_F(NpyTest, RejectsTrailingBytes) {
  expect_rejected(npy_file(kGoodDict, kGoodData + "x"), "trailing bytes");
}

TEST_F(NpyTest, RejectsFortranOrder) {
  expect_rejected(
      npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", kGoodData),
      "fortran_order");
}

TEST_F(NpyTest, RejectsUnsupportedDtypes) {
  expect_rejected(npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
                           kGoodData),
                  "unsupported dtype '<c8'");
  expect_rejected(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }",
                           kGoodData),
                  "not little-endian");
  expect_rejected(npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }",
                           kGoodData),
                  "expected a quoted string for 'descr'");
}

TEST_F(NpyTest, RejectsShapeProductOverflow) {
  // 2^62 * 2^62 elements overflows int64; 2^62 float32 overflows the byte count.
  expect_rejected(npy_file("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (4611686018427387904, 4611686018427387904), }",
                           kGoodData),
                  "overflow");
  expect_rejected(npy_file("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (4611686018427387904,), }",
                           kGoodData),
                  "overflow");
  expect_rejected(npy_file("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (99999999999999999999,), }",
                           kGoodData),
                  "does not fit in 64 bits");
  // Huge but representable: must be refused by size, not by trying to allocate.
  expect_rejected(npy_file("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (1000000000000,), }",
                           kGoodData),
                  "truncated");
}

TEST_F(NpyTest, RejectsHeaderLengthPastEndOfFile) {
  std::string bytes = npy_file(kGoodDict, kGoodData);
  bytes[8] = '\xff';
  bytes[9] = '\xff';
  expect_rejected(bytes, "runs past the end of the file");
  std::string v2 = npy_file(kGoodDict, kGoodData, 2);
  v2[8] = v2[9] = v2[10] = v2[11] = '\xff';
  expect_rejected(v2, "runs past the end of the file");
  expect_rejected(std::string("\x93NUMPY\x01\x00\x50", 9), "header length field");
}

TEST_F(NpyTest, RejectsUnsupportedVersion) {
  expect_rejected(npy_file(kGoodDict, kGoodData, 3), "version 3.0");
}

TEST_F(NpyTest, RejectsMalformedHeaders) {
  const struct {
    const char* dict;
    const char* expected;
  } cases[] = {
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{'descr': '<f4', 'shape': (2, 2), }", "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
       "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'x': 1}",
       "unexpected key 'x'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 2), }", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", "negative dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 2], }", "a tuple for 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), } junk", "after the header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 2), }", "expected ',' or ')'"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (2, 2), }", "expected ':'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), ", "expected a quoted key"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dict);
    expect_rejected(npy_file(c.dict, kGoodData), c.expected);
  }
}

TEST_F(NpyTest, RejectsBoolBytesOtherThanZeroOrOne) {
  expect_rejected(npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                           std::string("\x00\x01\x02", 3)),
                  "bool element 2");
}

TEST_F(NpyTest, RejectsMissingFileAndDirectory) {
  NpyArray out;
  std::string err;
  EXPECT_FALSE(read_npy(path("missing.npy"), &out, &err));
  EXPECT_NE(err.find("missing.npy"), std::string::npos) << err;
  EXPECT_FALSE(read_npy(dir_.string(), &out, &err));
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
}

// Every strict prefix of a valid file is invalid; none may crash or succeed.
TEST_F(NpyTest, EveryTruncationIsRejected) {
  const std::string bytes = npy_file(kGoodDict, kGoodData);
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string p = path("cut.npy");
    write_bytes(p, bytes.substr(0, n));
    NpyArray out;
    std::string err;
    EXPECT_FALSE(read_npy(p, &out, &err)) << "prefix of " << n << " bytes was accepted";
    EXPECT_FALSE(err.empty());
  }
}

// Flipping any header byte either still parses or is refused cleanly (run
// under the sanitizers, this is a small fuzz test of the parser).
TEST_F(NpyTest, CorruptedHeaderBytesNeverCrash) {
  const std::string bytes = npy_file(kGoodDict, kGoodData);
  const std::string p = path("flip.npy");
  const char replacements[] = {'\0', '\xff', '(', ')', ',', '\'', '}', '9', ' '};
  for (size_t i = 0; i + kGoodData.size() < bytes.size(); ++i) {
    for (char r : replacements) {
      std::string corrupt = bytes;
      corrupt[i] = r;
      write_bytes(p, corrupt);
      NpyArray out;
      std::string err;
      if (!read_npy(p, &out, &err)) {
        EXPECT_FALSE(err.empty());
      } else {
        int64_t count = 0;
        ASSERT_TRUE(kite::apps::npy_element_count(out.shape, &count));
        EXPECT_EQ(out.data.size(),
                  static_cast<size_t>(count) * kite::apps::npy_itemsize(out.dtype));
      }
    }
  }
}

// ---- writing ------------------------------------------------------------------

TEST_F(NpyTest, WriteRejectsSizeMismatchAndUnsupportedDtype) {
  NpyArray a;
  a.dtype = KITE_DTYPE_FLOAT32;
  a.shape = {2, 2};
  a.data.resize(15);
  std::string err;
  EXPECT_FALSE(write_npy(path("w.npy"), a, &err));
  EXPECT_NE(err.find("needs 16 bytes, array holds 15"), std::string::npos) << err;
  a.dtype = KITE_DTYPE_UNDEFINED;
  a.data.resize(16);
  EXPECT_FALSE(write_npy(path("w.npy"), a, &err));
  EXPECT_NE(err.find("unsupported"), std::string::npos) << err;
  a.dtype = KITE_DTYPE_FLOAT32;
  a.shape = {-1, 2};
  EXPECT_FALSE(write_npy(path("w.npy"), a, &err));
}

}  // namespace
