//! Deterministic sample inputs. Each (op, dtype) pair has its own generator seeded from its
//! name, so adding samples to one op never changes another op's data (or its fixture).

use crate::{SArg, View};
use thunder_core::dtype::{category, Category};
use thunder_core::{Array, DType};

/// Where values are drawn from, so that an op is tested inside its domain (declared per
/// elementwise prim in the elementwise table):
/// - `Any`: floats in [-3, 3); ints in [-5, 5] (u8: [0, 10]); bools mixed.
/// - `Pos`: floats in [0.1, 3); ints in [1, 5]; bools true.
/// - `Unit`: floats in (-0.9, 0.9) (asin, atanh, erfinv); ints in [-1, 1].
/// - `Ge1`: floats in [1, 4) (acosh); ints in [1, 4].
/// - `NonZero`: as `Any` but never 0 (divisors).
/// - `Small`: floats in [0, 3); ints in [0, 3] (exponents, shift amounts).
pub use thunder_abi::prims::Domain;

pub struct Gen {
    state: u64,
}

fn fnv(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Gen {
    pub fn new(op: &str, salt: &str) -> Gen {
        Gen {
            state: fnv(op) ^ fnv(salt).rotate_left(17),
        }
    }

    /// splitmix64: tiny, deterministic on every platform.
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn int_in(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    fn value(&mut self, dtype: DType, domain: Domain) -> f64 {
        match category(dtype) {
            Category::Bool => match domain {
                Domain::Pos | Domain::NonZero | Domain::Ge1 => 1.0,
                _ => (self.next_u64() & 1) as f64,
            },
            Category::Int => {
                let unsigned = dtype == DType::U8;
                let (lo, hi) = match domain {
                    Domain::Any | Domain::NonZero if unsigned => (0, 10),
                    Domain::Any | Domain::NonZero => (-5, 5),
                    Domain::Pos => (1, 5),
                    Domain::Unit if unsigned => (0, 1),
                    Domain::Unit => (-1, 1),
                    Domain::Ge1 => (1, 4),
                    Domain::Small => (0, 3),
                };
                let mut x = self.int_in(lo, hi);
                if domain == Domain::NonZero && x == 0 {
                    x = 1;
                }
                x as f64
            }
            Category::Float => {
                let u = self.unit();
                let x = match domain {
                    Domain::Any => -3.0 + 6.0 * u,
                    Domain::Pos => 0.1 + 2.9 * u,
                    Domain::Unit => -0.9 + 1.8 * u,
                    Domain::Ge1 => 1.0 + 3.0 * u,
                    Domain::Small => 3.0 * u,
                    Domain::NonZero => {
                        let m = 0.25 + 2.75 * u;
                        if self.next_u64() & 1 == 0 {
                            m
                        } else {
                            -m
                        }
                    }
                };
                // Three fractional bits fewer than bf16 keeps: every executor and PyTorch see
                // the same input in every float dtype, and ties in rounding ops are rare.
                (x * 32.0).round() / 32.0
            }
        }
    }

    /// A dense array of `shape` drawn from `domain`.
    pub fn array(&mut self, shape: &[i64], dtype: DType, domain: Domain) -> Array {
        let n: i64 = shape.iter().product();
        let mut values: Vec<f64> = (0..n.max(0)).map(|_| self.value(dtype, domain)).collect();
        // A bool tensor of several elements always mixes true and false.
        if dtype == DType::Bool && domain == Domain::Any && values.len() >= 2 {
            values[0] = 1.0;
            values[1] = 0.0;
        }
        array_of(&values, shape, dtype)
    }

    /// A tensor argument drawn from `Domain::Any`.
    pub fn t(&mut self, shape: &[i64], dtype: DType) -> SArg {
        self.td(shape, dtype, Domain::Any)
    }

    pub fn td(&mut self, shape: &[i64], dtype: DType, domain: Domain) -> SArg {
        SArg::Tensor(self.array(shape, dtype, domain), View::Plain)
    }

    /// A non-contiguous tensor of logical `shape` (rank >= 2): stored transposed and
    /// transposed back inside the program.
    pub fn nc(&mut self, shape: &[i64], dtype: DType) -> SArg {
        self.ncd(shape, dtype, Domain::Any)
    }

    pub fn ncd(&mut self, shape: &[i64], dtype: DType, domain: Domain) -> SArg {
        let mut stored = shape.to_vec();
        let r = stored.len();
        assert!(r >= 2, "a transposed view needs rank >= 2");
        stored.swap(r - 2, r - 1);
        SArg::Tensor(self.array(&stored, dtype, domain), View::Transposed)
    }

    /// A stride-0 view: `from` (with size-1 dims) expanded to `to` inside the program.
    pub fn bc(&mut self, from: &[i64], to: &[i64], dtype: DType) -> SArg {
        self.bcd(from, to, dtype, Domain::Any)
    }

    pub fn bcd(&mut self, from: &[i64], to: &[i64], dtype: DType, domain: Domain) -> SArg {
        SArg::Tensor(self.array(from, dtype, domain), View::Expanded(to.to_vec()))
    }

    /// Integer indices in `[0, hi)` (i64), e.g. class targets or gather indices.
    pub fn index(&mut self, shape: &[i64], hi: i64) -> SArg {
        let n: i64 = shape.iter().product();
        let values: Vec<f64> = (0..n.max(0))
            .map(|_| self.int_in(0, (hi - 1).max(0)) as f64)
            .collect();
        SArg::Tensor(array_of(&values, shape, DType::I64), View::Plain)
    }

    /// Distinct values (a shuffled range centred on 0, or from 0 for u8 and bool-free
    /// sorts), so that sorts, top-k and arg-extremes have no ties to break differently.
    pub fn distinct(&mut self, shape: &[i64], dtype: DType) -> SArg {
        let n: i64 = shape.iter().product::<i64>().max(0);
        let offset = if dtype == DType::U8 { 0 } else { n / 2 };
        let mut values: Vec<f64> = (0..n).map(|i| (i - offset) as f64).collect();
        for i in (1..values.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            values.swap(i, j);
        }
        if category(dtype) == Category::Float {
            for v in &mut values {
                *v *= 0.25;
            }
        }
        SArg::Tensor(array_of(&values, shape, dtype), View::Plain)
    }

    /// A fixed tensor from values (special values, exact cases).
    pub fn values(&mut self, values: &[f64], shape: &[i64], dtype: DType) -> SArg {
        SArg::Tensor(array_of(values, shape, dtype), View::Plain)
    }
}

fn array_of(values: &[f64], shape: &[i64], dtype: DType) -> Array {
    // The shapes are the table's own constants; a mismatch is a bug in a table row.
    Array::from_f64(values, shape, dtype)
        .unwrap_or_else(|e| panic!("OpInfo table: bad sample array {shape:?}: {e}"))
}
