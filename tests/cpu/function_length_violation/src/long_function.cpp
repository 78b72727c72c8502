// A tree for the cudrv_function_length_refuses_long_function test (tests/cpu/check_function_length.py):
// one function one line over the limit of 80, which the check must name, among what it must not count
// as a function or must not be misled by: a function of exactly 80 lines, a long struct and a long
// initializer, braces in comments, literals and directives, member initializers in braces, a lambda
// at namespace scope and an operator.
#define FIXTURE_BLOCK(x) { x }
#include <string>

namespace fixture {

// Braces that are no code: } { in a comment.
/* } } { */
const char* const braces_in_text = "}}{ \" }";
const char braces_in_chars[] = {'{', '}', '\'', '"'};
const std::string braces_in_raw = R"raw(}}{ )" ")raw";
const int digits = 1'000'000;

enum class colour { red, green, blue };

struct long_table {
  int field_0 = 0;
  int field_1 = 1;
  int field_2 = 2;
  int field_3 = 3;
  int field_4 = 4;
  int field_5 = 5;
  int field_6 = 6;
  int field_7 = 7;
  int field_8 = 8;
  int field_9 = 9;
  int field_10 = 10;
  int field_11 = 11;
  int field_12 = 12;
  int field_13 = 13;
  int field_14 = 14;
  int field_15 = 15;
  int field_16 = 16;
  int field_17 = 17;
  int field_18 = 18;
  int field_19 = 19;
  int field_20 = 20;
  int field_21 = 21;
  int field_22 = 22;
  int field_23 = 23;
  int field_24 = 24;
  int field_25 = 25;
  int field_26 = 26;
  int field_27 = 27;
  int field_28 = 28;
  int field_29 = 29;
  int field_30 = 30;
  int field_31 = 31;
  int field_32 = 32;
  int field_33 = 33;
  int field_34 = 34;
  int field_35 = 35;
  int field_36 = 36;
  int field_37 = 37;
  int field_38 = 38;
  int field_39 = 39;
  int field_40 = 40;
  int field_41 = 41;
  int field_42 = 42;
  int field_43 = 43;
  int field_44 = 44;
  int field_45 = 45;
  int field_46 = 46;
  int field_47 = 47;
  int field_48 = 48;
  int field_49 = 49;
  int field_50 = 50;
  int field_51 = 51;
  int field_52 = 52;
  int field_53 = 53;
  int field_54 = 54;
  int field_55 = 55;
  int field_56 = 56;
  int field_57 = 57;
  int field_58 = 58;
  int field_59 = 59;
  int field_60 = 60;
  int field_61 = 61;
  int field_62 = 62;
  int field_63 = 63;
  int field_64 = 64;
  int field_65 = 65;
  int field_66 = 66;
  int field_67 = 67;
  int field_68 = 68;
  int field_69 = 69;
  int field_70 = 70;
  int field_71 = 71;
  int field_72 = 72;
  int field_73 = 73;
  int field_74 = 74;
  int field_75 = 75;
  int field_76 = 76;
  int field_77 = 77;
  int field_78 = 78;
  int field_79 = 79;
  int field_80 = 80;
  int field_81 = 81;
  int field_82 = 82;
  int field_83 = 83;
  int field_84 = 84;
  int field_85 = 85;
  int field_86 = 86;
  int field_87 = 87;
  int field_88 = 88;
  int field_89 = 89;
};

const int long_initializer[] = {
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    12,
    13,
    14,
    15,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    25,
    26,
    27,
    28,
    29,
    30,
    31,
    32,
    33,
    34,
    35,
    36,
    37,
    38,
    39,
    40,
    41,
    42,
    43,
    44,
    45,
    46,
    47,
    48,
    49,
    50,
    51,
    52,
    53,
    54,
    55,
    56,
    57,
    58,
    59,
    60,
    61,
    62,
    63,
    64,
    65,
    66,
    67,
    68,
    69,
    70,
    71,
    72,
    73,
    74,
    75,
    76,
    77,
    78,
    79,
    80,
    81,
    82,
    83,
    84,
    85,
    86,
    87,
    88,
    89,
};

class holder {
 public:
  explicit holder(int v) : value_{v}, other_(v) {}
  bool operator<(const holder& o) const noexcept { return value_ < o.value_; }
  int get() const { return value_; }

 private:
  int value_{0};
  int other_ = 0;
};

const auto namespace_lambda = [](int x) {
  return x + 1;
};

int exactly_at_the_limit() {
  int total = 0;
  total += 0;
  total += 1;
  total += 2;
  total += 3;
  total += 4;
  total += 5;
  total += 6;
  total += 7;
  total += 8;
  total += 9;
  total += 10;
  total += 11;
  total += 12;
  total += 13;
  total += 14;
  total += 15;
  total += 16;
  total += 17;
  total += 18;
  total += 19;
  total += 20;
  total += 21;
  total += 22;
  total += 23;
  total += 24;
  total += 25;
  total += 26;
  total += 27;
  total += 28;
  total += 29;
  total += 30;
  total += 31;
  total += 32;
  total += 33;
  total += 34;
  total += 35;
  total += 36;
  total += 37;
  total += 38;
  total += 39;
  total += 40;
  total += 41;
  total += 42;
  total += 43;
  total += 44;
  total += 45;
  total += 46;
  total += 47;
  total += 48;
  total += 49;
  total += 50;
  total += 51;
  total += 52;
  total += 53;
  total += 54;
  total += 55;
  total += 56;
  total += 57;
  total += 58;
  total += 59;
  total += 60;
  total += 61;
  total += 62;
  total += 63;
  total += 64;
  total += 65;
  total += 66;
  total += 67;
  total += 68;
  total += 69;
  total += 70;
  total += 71;
  total += 72;
  total += 73;
  total += 74;
  total += 75;
  return total;
}

int one_line_too_long() {
  int total = 0;
  total += 0;
  total += 1;
  total += 2;
  total += 3;
  total += 4;
  total += 5;
  total += 6;
  total += 7;
  total += 8;
  total += 9;
  total += 10;
  total += 11;
  total += 12;
  total += 13;
  total += 14;
  total += 15;
  total += 16;
  total += 17;
  total += 18;
  total += 19;
  total += 20;
  total += 21;
  total += 22;
  total += 23;
  total += 24;
  total += 25;
  total += 26;
  total += 27;
  total += 28;
  total += 29;
  total += 30;
  total += 31;
  total += 32;
  total += 33;
  total += 34;
  total += 35;
  total += 36;
  total += 37;
  total += 38;
  total += 39;
  total += 40;
  total += 41;
  total += 42;
  total += 43;
  total += 44;
  total += 45;
  total += 46;
  total += 47;
  total += 48;
  total += 49;
  total += 50;
  total += 51;
  total += 52;
  total += 53;
  total += 54;
  total += 55;
  total += 56;
  total += 57;
  total += 58;
  total += 59;
  total += 60;
  total += 61;
  total += 62;
  total += 63;
  total += 64;
  total += 65;
  total += 66;
  total += 67;
  total += 68;
  total += 69;
  total += 70;
  total += 71;
  total += 72;
  total += 73;
  total += 74;
  total += 75;
  total += 76;
  return total;
}

}  // namespace fixture
