//! Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as
//! easy as 1, 2, 3", SC 2011; the Random123 reference constants), written out here because it
//! is twenty lines and the element-to-counter mapping (documented on `prims.uniform` in
//! `thunder-abi`) is what makes every executor agree, not the library.

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = u64::from(a) * u64::from(b);
    ((p >> 32) as u32, p as u32)
}

/// The Philox4x32 block function with 10 rounds.
pub(crate) fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let (hi0, lo0) = mulhilo(M0, c[0]);
        let (hi1, lo1) = mulhilo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The two words element `i` reads (see the mapping on `prims.uniform`).
fn words(seed: u64, offset: u64, i: u64) -> (u32, u32) {
    let block = offset.wrapping_add(i / 2);
    let w = philox4x32_10(
        [block as u32, (block >> 32) as u32, 0, 0],
        [seed as u32, (seed >> 32) as u32],
    );
    let j = 2 * (i % 2) as usize;
    (w[j], w[j + 1])
}

/// `n` uniform values in `[low, high)` (before rounding to the output dtype).
pub(crate) fn uniform(n: usize, low: f64, high: f64, seed: u64, offset: u64) -> Vec<f64> {
    (0..n as u64)
        .map(|i| {
            let (x, y) = words(seed, offset, i);
            let u = (f64::from(x >> 5) * 67_108_864.0 + f64::from(y >> 6)) * 2f64.powi(-53);
            low + (high - low) * u
        })
        .collect()
}

/// `n` normal values (Box-Muller, cosine branch).
pub(crate) fn normal(n: usize, mean: f64, std: f64, seed: u64, offset: u64) -> Vec<f64> {
    (0..n as u64)
        .map(|i| {
            let (x, y) = words(seed, offset, i);
            let u1 = (f64::from(x) + 1.0) * 2f64.powi(-32);
            let u2 = f64::from(y) * 2f64.powi(-32);
            mean + std * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer vectors of Random123's `kat_vectors` for philox4x32 with 10 rounds.
    #[test]
    fn philox_matches_the_random123_known_answers() {
        let cases: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            (
                [0; 4],
                [0; 2],
                [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
            ),
            (
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0],
                [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
            ),
        ];
        for (counter, key, expected) in cases {
            assert_eq!(
                philox4x32_10(counter, key),
                expected,
                "{counter:x?} {key:x?}"
            );
        }
    }

    #[test]
    fn uniform_reads_the_documented_words() {
        // Element 3 of offset 5 is block 6, words 2 and 3.
        let w = philox4x32_10([6, 0, 0, 0], [7, 0]);
        let u = (f64::from(w[2] >> 5) * 67_108_864.0 + f64::from(w[3] >> 6)) * 2f64.powi(-53);
        assert_eq!(uniform(4, 0.0, 1.0, 7, 5)[3], u);
    }
}
