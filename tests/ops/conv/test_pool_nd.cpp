// Pooling over 1 and 3 spatial dims and avg_pool's divisor_override: values and indices against
// PyTorch 1.13 (torch.nn.functional, float64), gradients, modules, errors, and CUDA against the CPU.
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;

// The fixed input of the PyTorch references: sin(arange(n) * 0.7) * 3 in the given shape (float64).
Tensor wave(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return mul(sin(mul(arange(n, {.dtype = kFloat64}), 0.7)), 3.0).reshape(shape);
}

// The weights of the PyTorch references' losses: sin(arange(n) * 0.3) in the given shape.
Tensor weights(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return sin(mul(arange(n, {.dtype = kFloat64}), 0.3)).reshape(shape);
}

Tensor f64(const std::vector<double>& v, const Shape& shape) { return from_vector(v, shape, {.dtype = kFloat64}); }

TEST(MaxPool1d, MatchesPyTorch) {
  // F.max_pool1d(x, 3, 2, 1, 2, ceil_mode=True, return_indices=True), x = wave([2, 3, 9])
  auto [v, i] = max_pool1d_with_indices(wave({2, 3, 9}), {3}, {2}, {1}, {2}, true);
  expect_close(v, f64({2.5896280999466219, 2.5896280999466219, 2.5896280999466219, -1.0523496830688595,
                       2.5637967242648445, 2.5637967242648445, 2.5637967242648445, -1.0994373877557804,
                       2.5372404934288029, 2.5372404934288029, 2.5372404934288029, -1.1462142515520175,
                       2.5099669156081683, 2.5099669156081683, 2.5099669156081683, -1.1926670493642988,
                       2.4819837017861417, 2.4819837017861417, 2.4819837017861417, -1.2387826477216204,
                       2.4532987635793373, 2.4532987635793373, 2.4532987635793373, -1.2845480084884531},
                      {2, 3, 4}),
               1e-14, 1e-14);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 3, 5, 3, 3, 3, 5, 3, 3, 3, 5,
                                                          3, 3, 3, 5, 3, 3, 3, 5, 3, 3, 3, 5}));
  // unbatched [C, L]
  EXPECT_EQ(max_pool1d(wave({3, 9}), {2}).sizes(), (Shape{3, 4}));
}

TEST(MaxPool3d, MatchesPyTorchWithIndicesAndGradient) {
  // F.max_pool3d(x, (2, 3, 2), (2, 2, 1), (1, 1, 0), (1, 1, 2), ceil_mode=True, return_indices=True),
  // x = wave([1, 2, 5, 6, 4])
  Tensor x = wave({1, 2, 5, 6, 4}).requires_grad_(true);
  auto [v, i] = max_pool3d_with_indices(x, {2, 3, 2}, {2, 2, 1}, {1, 1, 0}, {1, 1, 2}, true);
  ASSERT_EQ(v.sizes(), (Shape{1, 2, 3, 4, 2}));
  expect_close(v, f64({2.9563491899653807, 2.5896280999466219, 2.5637967242648445, 2.9645047016310007,
                       2.9718220670846112, 2.5372404934288029, 2.9718220670846112, 2.5372404934288029,
                       2.5099669156081683, 2.9782992175077201, 2.9926722567234139, 2.9782992175077201,
                       2.9839343216335132, 2.9957726172353114, 2.118508371540988,  2.9887257862645908,
                       2.9980259912439311, 2.9996990216918795, 2.998560475742194,  2.9996990216918795,
                       2.9999894710368196, 2.9965741550857099, 2.9999894710368196, 2.9965741550857099,
                       2.1995709602198765, 2.4145197711608199, 2.9937406213093714, 2.4145197711608199,
                       2.4441151897753493, 2.9900606755303425, -1.7201456159712687, -1.2532430483951211,
                       2.9855353581695114, 2.9669011637107574, 2.9590095385923076, 2.9801659486573304,
                       2.973953965072103,  2.9502813208940895, 2.973953965072103,  2.9502813208940895,
                       2.9191029677539433, 2.6784395723451357, 2.9407189783209349, 2.9070554111949694,
                       2.8941859509028967, 2.9303252144075262, 2.8941859509028967, 1.7048316836564443},
                      v.sizes()),
               1e-14, 1e-14);
  EXPECT_EQ(i.to_vector<int64_t>(),
            (std::vector<int64_t>{2, 3, 12, 11, 20, 21, 20, 21, 30, 29, 56, 29, 38, 65, 46, 47,
                                  74, 101, 110, 101, 92, 119, 92, 119, 0, 7, 8, 7, 16, 17, 20, 23,
                                  26, 53, 62, 35, 44, 71, 44, 71, 98, 97, 80, 107, 116, 89, 116, 117}));
  // (y * sin(arange(y.numel()) * 0.3).reshape(y.shape)).sum().backward(): gradients accumulate where
  // windows share a maximum.
  (v * weights(v.sizes())).sum().backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  const std::vector<std::pair<int, double>> nonzero{
      {3, 0.29552020666133955},   {11, 0.7833269096274833},   {12, 0.56464247339503537},  {20, 1.9058867168454214},
      {21, 1.8607043532529282},   {29, 0.26963418609058198},  {30, 0.67546318055115095},  {38, -0.44252044329485207},
      {46, -0.87157577241358819}, {47, -0.97753011766509701}, {56, 0.14112000805986721},  {65, -0.68776615918397377},
      {74, -0.99616460883584068}, {92, 0.032125865314451996}, {101, -1.47650022492537},   {110, -0.7727644875559877},
      {119, 0.59525366487254916}, {120, 0.79366786384915267}, {127, 1.9078897876198253},  {128, 0.99854334537460498},
      {136, 0.85459890808828043}, {137, 0.66296923008218334}, {140, 0.41211848524175659}, {143, 0.12445442350706347},
      {146, -0.17432678122297965}, {155, -0.87969575997167004}, {164, -1.9002647557311669}, {173, -0.45753589377532133},
      {182, -0.69987468759354232}, {191, -1.7565361721230226}, {200, 0.033623047221136695}, {209, 0.80378442655162097},
      {217, -0.26323179136580266}, {218, -0.53657291800043494}, {227, 0.32747443913769303}, {236, 1.5357691841513272},
      {237, 0.99930938874791775}};
  std::vector<double> expect(240, 0.0);
  for (auto [k, val] : nonzero) expect[static_cast<size_t>(k)] = val;
  ASSERT_EQ(g.size(), expect.size());
  for (size_t k = 0; k < g.size(); ++k) EXPECT_NEAR(g[k], expect[k], 1e-13) << "at " << k;
}

TEST(AvgPool1d, MatchesPyTorch) {
  // F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), x = wave([2, 2, 7])
  expect_close(avg_pool1d(wave({2, 2, 7}), {3}, {2}, {1}, true, false),
               f64({0.96632653085653653, 2.4928767838750252, 0.84741428911515937, -1.8335385001548112,
                    -2.4205788757449813, 0.042533861330817192, 2.4997537406840711, 1.7605459056564503,
                    -1.8692623338353953, -2.4770106013600222, 0.08505569718070298, 2.4902656768372071,
                    1.7232977818329573, -0.96652009401980488, -2.4680258614559447, -0.83161520189920934},
                   {2, 2, 4}),
               1e-14, 1e-14);
}

TEST(AvgPool3d, MatchesPyTorch) {
  Tensor x = wave({1, 2, 4, 5, 5});
  // F.avg_pool3d(x, 3, 2, 1, ceil_mode=True)
  expect_close(
      avg_pool3d(x, {3}, {2}, {1}, true),
      f64({-0.11498798343068596, -0.096728350353326789, 0.043498776861922502, -0.1087267316709935,
           -0.37999694303390946, -0.1721183345047417, 0.069511427739357645, -0.062210963620608434,
           -0.11548980339520344, 0.060382223658232391, -0.062827640842922097, -0.10681636812612941,
           0.26169732468149992, 0.19415025909696931, -0.11820632202030515, 0.049076533882297886,
           0.14403384408856357, 0.057374834256703491, 0.10375131343082937, 0.1176110952987153,
           -0.016828256686078309, 0.043476226265968282, 0.34430330072544879, 0.21098867154278603,
           -0.085566741940022215, 0.026398827463692622, 0.10507737375408042, -0.085870773121739241,
           0.033934163537913016, 0.11095056015458657, -0.27237811422548552, -0.27873513249078935,
           0.066372807696236755, -0.028055381838538267, -0.15051923494614988, -0.083189156503446007,
           -0.030193064648233719, -0.14021674404640161, -0.073437192075024041, 0.17820913026689056,
           -0.105227671466638, -0.25597994631771759, 0.10473165614943868, 0.096203721782456564,
           -0.033630187820165594, 0.097579411422641926, 0.0020599974908618928, -0.096056925144134608,
           0.23636911258909243, 0.3186691987965366, -0.00084965943340077469, 0.0012854486459461028,
           0.13122808487359233, 0.095701542581377211},
          {1, 2, 3, 3, 3}),
      1e-14, 1e-14);
}

TEST(AvgPool3d, DivisorOverrideMatchesPyTorchWithGradient) {
  // F.avg_pool3d(x, (2, 3, 3), (1, 2, 2), (1, 1, 0), count_include_pad=False, divisor_override=5)
  Tensor x = wave({1, 2, 4, 5, 5}).requires_grad_(true);
  Tensor y = avg_pool3d(x, {2, 3, 3}, {1, 2, 2}, {1, 1, 0}, false, false, 5);
  expect_close(y.detach(),
               f64({-0.3450865173008334,  0.35204513806856097, -1.3092410840420949, -0.4227789069875369,
                    -0.20252283466590812, -0.52887863810346114, -0.8274166372960009, 0.028411868284085172,
                    -1.3982862149348421,  -1.7406008702370825, 0.24256284882453977, -0.75644379930209027,
                    -0.3489286102693695,  -0.81771455348405497, 1.1811158326548201, -1.4734086625314717,
                    0.84294769017853954,  0.20143969570155978, 0.67427887449412949, -0.38729037135211553,
                    1.9166542446673325,   1.0939513848343831,  0.12738997141937966, 0.84485163813024644,
                    0.54087736476833148,  0.10679091234746388, 0.64649328111976534, 1.2495380841163091,
                    -0.27047203526871194, 0.41584678123005769, 0.10397870832754696, 0.54094967145326955,
                    -0.9864280398968196,  0.70398388170152271, -0.51656675362627902, -0.24649805215073367,
                    -0.39126448858044161, 0.6715707111117174,  -2.0658447865880007, -0.23658980821070044,
                    -0.47280549718159615, -0.77052788037209807, -0.81657420305596451, -0.3530016795202367,
                    -0.5667230491618469,  -2.0573564834377556, 0.57953394707957728, -0.5075179485238378,
                    0.032886462424387017, -0.82649606224671734, 1.8171214164696834, -0.66634265386615854,
                    0.72715131323546223,  0.54778844046564612, 0.3542174685723628, -0.34287334306803269,
                    1.304427718940349,    0.45044013965937379, 0.19137862260056776, 0.5312765607681198},
                   {1, 2, 5, 3, 2}),
               1e-14, 1e-14);
  // (y * sin(arange(y.numel()) * 0.3).reshape(y.shape)).sum().backward(): the first 12 entries of x.grad
  (y * weights(y.sizes())).sum().backward();
  expect_close(x.grad().flatten().slice(0, 0, 12),
               f64({0.19476952617563906, 0.19476952617563906, 0.42651544083768167, 0.23174591466204264,
                    0.23174591466204264, 0.44279065696487635, 0.44279065696487635, 0.91667792959918182,
                    0.47388727263430536, 0.47388727263430536, 0.24802113078923727, 0.24802113078923727},
                   {12}),
               1e-13, 1e-13);
  // the last 7 entries
  expect_close(x.grad().flatten().slice(0, 193, 200),
               f64({-0.33815309262328019, -0.33815309262328019, -0.17698114563423784, -0.17698114563423784,
                    -0.39766935186731223, -0.22068820623307445, -0.22068820623307445},
                   {7}),
               1e-13, 1e-13);
}

TEST(AvgPool2d, DivisorOverrideMatchesPyTorch) {
  // F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=3), x = wave([1, 1, 4, 5])
  expect_close(avg_pool2d(wave({1, 1, 4, 5}), {3}, {2}, {1}, true, true, 3),
               f64({-0.57814131286551651, 0.0075817609647833946, 0.58374477941680725, -1.4360776566304054,
                    -1.8871213127628239, 0.041359305127191139, -1.8588734891229874, -1.5636917941672153,
                    0.70319280941773776},
                   {1, 1, 3, 3}),
               1e-14, 1e-14);
}

TEST(AdaptiveAvgPool, OneAndThreeDimsMatchPyTorch) {
  // F.adaptive_avg_pool1d(wave([2, 7]), 3)
  expect_close(adaptive_avg_pool1d(wave({2, 7}), {3}),
               f64({1.6296674172261512, 2.1836472467932393, -0.88737084994730253, -1.5969053500123047,
                    1.6619687330801389, 2.1618655043146338},
                   {2, 3}),
               1e-14, 1e-14);
  // F.adaptive_avg_pool3d(wave([1, 2, 5, 4, 7]), (2, 3, 4))
  expect_close(
      adaptive_avg_pool3d(wave({1, 2, 5, 4, 7}), {2, 3, 4}),
      f64({0.70840445702503974, 1.5895110211089847, 0.44624942144549024, -1.2369319966405621, -1.474215555419236,
           0.1209142311632771,  1.5922907085939835, 1.0294304162940884,  -1.2583233295867591, -1.5444070216066406,
           0.14771440429333896, 1.6209350088379197, 1.6805215263052222,  0.28927755185028242, -1.5010897694011911,
           -1.3659088064438702, 0.8955069229189544, 1.5994963833279527,  0.26278591865982309, -1.3789957767961178,
           -1.3464752902493566, 0.3073741688243915, 1.5991154180814533,  0.85150926693593465, -1.5178853221930455,
           -1.4047222545329696, 0.51511492107604473, 1.7488466697796639, 0.63389375928930713, -1.0135768229163216,
           -1.3916610012897774, -0.0094418823176223299, 1.754343376207502, 1.0266330248651119, -1.0342389026431431,
           -1.7523687254653915, -1.0371227926225359, 0.66501236818494469, 1.5465910586414207, 0.46294260258059555,
           -1.6169906705352133, -1.3051677849394956, 0.68937800278125738, 1.7768630463222623, 0.43394527003108524,
           -1.1518722403111028, -1.2894360091883523, 0.19987127123737647},
          {1, 2, 2, 3, 4}),
      1e-14, 1e-14);
}

// A 16-bit average sums in float: these nine bfloat16 values of mixed sign average to 7.7989e-4, a
// bfloat16 running sum loses every digit of that. F.adaptive_avg_pool2d(x.bfloat16(), 1) and
// F.avg_pool2d(x.bfloat16(), 3) give 0.0007781982421875 (PyTorch 1.13, CPU).
TEST(AvgPool, SixteenBitWindowsSumInFloat) {
  const std::vector<double> v{-1.1171875, 0.421875, -0.388671875, -0.55078125, 0.51953125,
                              -0.008605957031250, 0.400390625, -0.2109375, 0.94140625};
  std::vector<Device> devices{kCPU};
  if (cuda_is_available()) devices.push_back(cuda_device(0));
  for (Device d : devices) {
    Tensor x = from_vector(v, {1, 1, 3, 3}, {.dtype = kFloat64}).to(kBFloat16).to(d);
    for (const Tensor& y : {adaptive_avg_pool2d(x, {1, 1}), avg_pool2d(x, {3, 3})}) {
      ASSERT_EQ(y.dtype(), kBFloat16);
      EXPECT_EQ(y.to(kCPU).to(kFloat64).item<double>(), 0.0007781982421875) << d.str();
    }
  }
}

// The 2-D pooling is the 3-D one over a depth of 1, and the 1-D one the 2-D one over a height of 1.
TEST(PoolNd, LowerRanksAgreeWithHigherRanks) {
  Tensor x = testing::random_tensor({2, 3, 7, 6});
  expect_close(max_pool3d(x.unsqueeze(2), {1, 3, 2}, {1, 2, 1}, {0, 1, 1}, {1, 1, 2}, true).squeeze(2),
               max_pool2d(x, {3, 2}, {2, 1}, {1, 1}, {1, 2}, true));
  expect_close(avg_pool3d(x.unsqueeze(2), {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, true, false).squeeze(2),
               avg_pool2d(x, {3}, {2}, {1}, true, false));
  Tensor l = testing::random_tensor({2, 3, 11});
  expect_close(max_pool1d(l, {3}, {2}, {1}, {2}), max_pool2d(l.unsqueeze(2), {1, 3}, {1, 2}, {0, 1}, {1, 2}).squeeze(2));
  expect_close(avg_pool1d(l, {4}, {3}, {2}, true), avg_pool2d(l.unsqueeze(2), {1, 4}, {1, 3}, {0, 2}, true).squeeze(2));
  expect_close(adaptive_avg_pool1d(l, {4}), adaptive_avg_pool2d(l.unsqueeze(2), {1, 4}).squeeze(2));
  // non-contiguous 3-D input
  Tensor v = testing::random_tensor({2, 5, 4, 6, 3}).permute({0, 4, 1, 2, 3});
  ASSERT_FALSE(v.is_contiguous());
  expect_close(max_pool3d(v, {2}, {1}, {1}), max_pool3d(v.contiguous(), {2}, {1}, {1}));
  expect_close(avg_pool3d(v, {3}, {2}, {1}, false, true, -2), avg_pool3d(v.contiguous(), {3}, {2}, {1}, false, true, -2));
  // zero batch
  EXPECT_EQ(max_pool3d(zeros({0, 2, 4, 4, 4}), {2}).sizes(), (Shape{0, 2, 2, 2, 2}));
  EXPECT_EQ(avg_pool1d(zeros({0, 2, 4}), {2}).sizes(), (Shape{0, 2, 2}));
}

TEST(PoolNd, Gradients) {
  using L = const TensorList&;
  auto in = [](const Shape& s) { return TensorList{testing::random_tensor(s, kFloat64, true)}; };
  testing::expect_gradcheck([](L a) { return max_pool1d(a[0], {3}, {2}, {1}, {2}, true); }, in({2, 2, 9}));
  testing::expect_gradcheck([](L a) { return max_pool3d(a[0], {2, 3, 2}, {2, 1, 1}, {1, 1, 0}, {1, 1, 2}); },
                            in({1, 2, 4, 5, 4}));
  testing::expect_gradcheck([](L a) { return avg_pool1d(a[0], {3}, {2}, {1}, true, false); }, in({2, 2, 8}));
  testing::expect_gradcheck([](L a) { return avg_pool3d(a[0], {2, 3, 2}, {2, 1, 1}, {1, 1, 0}, true, false); },
                            in({1, 2, 4, 5, 4}));
  testing::expect_gradgradcheck([](L a) { return avg_pool3d(a[0] * a[0], {3}, {2}, {1}, false, true, 7); },
                                in({1, 1, 5, 4, 5}));
  testing::expect_gradgradcheck([](L a) { return avg_pool2d(a[0] * a[0], {2}, {1}, {1}, true, true, 3); },
                                in({1, 2, 4, 5}));
  testing::expect_gradcheck([](L a) { return adaptive_avg_pool1d(a[0], {3}); }, in({2, 7}));
  testing::expect_gradgradcheck([](L a) { return adaptive_avg_pool3d(a[0] * a[0], {2, 3, 2}); }, in({1, 1, 5, 4, 3}));
}

TEST(PoolNd, Modules) {
  EXPECT_EQ(nn::MaxPool1d({2})(randn({2, 3, 8})).sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(nn::MaxPool3d({2}, {1}, {1})(randn({2, 3, 4, 4, 4})).sizes(), (Shape{2, 3, 5, 5, 5}));
  EXPECT_EQ(nn::AvgPool1d({3}, {2}, {1})(randn({3, 8})).sizes(), (Shape{3, 4}));
  Tensor x = randn({1, 2, 4, 4, 4});
  nn::AvgPool3d avg({2}, {}, {0}, false, true, 2);
  expect_close(avg(x), avg_pool3d(x, {2}) * 4.0, 1e-5, 1e-6);
  EXPECT_EQ(avg.extra_repr(), "kernel_size=[2], stride=[2], padding=[0], divisor_override=2");
  EXPECT_EQ(avg.type_name(), "AvgPool3d");
  EXPECT_EQ(nn::AdaptiveAvgPool3d({1})(x).sizes(), (Shape{1, 2, 1, 1, 1}));
  EXPECT_EQ(nn::AdaptiveAvgPool1d({2})(randn({2, 3, 5})).sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(nn::MaxPool3d({2}).type_name(), "MaxPool3d");
}

TEST(PoolNd, ClearErrors) {
  EXPECT_THROW_MSG(max_pool1d(zeros({4}), {2}), "[max_pool1d] input of shape [4] has the wrong rank: expected 2-D [C, L] or 3-D [N, C, L]");
  EXPECT_THROW_MSG(max_pool3d(zeros({1, 4, 4, 4, 4, 4}), {2}), "expected 4-D [C, D, H, W] or 5-D [N, C, D, H, W]");
  EXPECT_THROW_MSG(max_pool1d(zeros({1, 1, 4}), {2, 2}), "[max_pool1d] kernel_size must have 1 element, got [2, 2]");
  EXPECT_THROW_MSG(avg_pool3d(zeros({1, 1, 4, 4, 4}), {2, 2}), "kernel_size must have 1 or 3 elements");
  EXPECT_THROW_MSG(avg_pool3d(zeros({1, 1, 4, 4, 4}), {2}, {2}, {0}, false, true, 0), "divisor_override must be non-zero");
  EXPECT_THROW_MSG(max_pool3d(zeros({1, 1, 4, 1, 4}), {2}), "[max_pool3d] input of shape [1, 1, 4, 1, 4] is too small");
  EXPECT_THROW_MSG(avg_pool1d(zeros({1, 1, 4}), {2}, {1}, {2}), "should be at most half of kernel_size");
  EXPECT_THROW_MSG(adaptive_avg_pool3d(zeros({1, 1, 4, 4, 4}), {2, 0, 2}), "output_size [2, 0, 2] must be >= 1");
  EXPECT_THROW_MSG(max_pool3d(zeros({1, 1, 4, 4, 4}, {.dtype = kInt64}), {2}), "[max_pool3d]");
}

TEST(PoolNdCuda, MatchesCpuForwardAndBackward) {
  TG_REQUIRE_CUDA();
  using L = const TensorList&;
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x3 = testing::random_tensor({2, 3, 5, 6, 7}, dt), x1 = testing::random_tensor({3, 4, 11}, dt);
    auto check = [&](testing::TensorFn fn, const Tensor& x) { testing::expect_cuda_matches_cpu(fn, {x}, 1e-4, 1e-5); };
    check([](L a) { return max_pool3d(a[0], {3, 2, 3}, {2, 1, 2}, {1, 1, 1}, {1, 2, 1}, true); }, x3);
    check([](L a) { return max_pool3d_with_indices(a[0], {2}, {1}, {1}).second; }, x3);
    check([](L a) { return avg_pool3d(a[0], {3}, {2}, {1}, true, false); }, x3);
    check([](L a) { return avg_pool3d(a[0], {2, 3, 3}, {1, 2, 2}, {1}, false, true, 5); }, x3);
    check([](L a) { return adaptive_avg_pool3d(a[0], {2, 4, 3}); }, x3);
    check([](L a) { return max_pool1d(a[0], {3}, {2}, {1}, {2}, true); }, x1);
    check([](L a) { return avg_pool1d(a[0], {3}, {2}, {1}, true, false); }, x1);
    check([](L a) { return adaptive_avg_pool1d(a[0], {4}); }, x1);
    auto grads = [&](Device d) {
      Tensor xd = x3.to(d).detach().requires_grad_(true);
      Tensor y = max_pool3d(xd, {3}, {2}, {1}).sum() + (avg_pool3d(xd, {2}, {1}, {1}, false, true, 3) * 2).sum() +
                 (adaptive_avg_pool3d(xd, {2, 5, 3}) * 3).sum();
      y.backward();
      return xd.grad().to(kCPU);
    };
    expect_close(grads(cuda_device(0)), grads(kCPU), 1e-4, 1e-5);
  }
}

}  // namespace
}  // namespace tg
