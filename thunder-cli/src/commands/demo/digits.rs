//! The digits dataset: loading, a seeded train/test split, and batches.

use anyhow::{bail, Context, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::path::Path;
use thunder_core::runtime::npy::read_npy;
use thunder_core::Array;

pub struct Digits {
    /// Pixels scaled to [0, 1], 64 per image.
    pub images: Vec<f32>,
    pub labels: Vec<i64>,
}

pub const PIXELS: usize = 64;
pub const CLASSES: usize = 10;

impl Digits {
    pub fn load(dir: &Path) -> Result<Digits> {
        let images = read_npy(&dir.join("images.npy"))
            .with_context(|| "the digits dataset (run from the repo root, or pass --data DIR)")?;
        let labels = read_npy(&dir.join("labels.npy"))?;
        if images.shape().len() != 2
            || images.shape()[1] != PIXELS as i64
            || labels.shape() != [images.shape()[0]]
        {
            bail!(
                "{}: expected images [N, 64] and labels [N], got {:?} and {:?}",
                dir.display(),
                images.shape(),
                labels.shape()
            );
        }
        let images = images
            .to_f64_vec()?
            .into_iter()
            .map(|p| (p / 16.0) as f32)
            .collect();
        let labels: Vec<i64> = labels.to_f64_vec()?.into_iter().map(|l| l as i64).collect();
        if labels.iter().any(|&l| !(0..CLASSES as i64).contains(&l)) {
            bail!("{}: labels must be in 0..{CLASSES}", dir.display());
        }
        Ok(Digits { images, labels })
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Shuffles indices with `seed` and holds out `test_fraction` of them.
    pub fn split(&self, test_fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
        let mut idx: Vec<usize> = (0..self.len()).collect();
        idx.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
        let n_test = (self.len() as f64 * test_fraction).round() as usize;
        let test = idx.split_off(self.len() - n_test);
        (idx, test)
    }

    /// The images and labels at `idx` as `x: f32[B, 64]`, `y: i64[B]`.
    pub fn batch(&self, idx: &[usize]) -> Result<(Array, Array)> {
        let mut x = Vec::with_capacity(idx.len() * PIXELS);
        let mut y = Vec::with_capacity(idx.len());
        for &i in idx {
            x.extend_from_slice(&self.images[i * PIXELS..(i + 1) * PIXELS]);
            y.push(self.labels[i]);
        }
        let b = idx.len() as i64;
        Ok((
            Array::from_slice(&x, &[b, PIXELS as i64])?,
            Array::from_slice(&y, &[b])?,
        ))
    }
}
