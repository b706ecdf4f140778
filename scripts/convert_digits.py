"""Converts scikit-learn's *digits* dataset (1,797 8x8 images of handwritten digits, BSD-3-Clause,
from the UCI ML hand-written digits data) into the small fixture the demo trains on.

Run from the repo root (needs scikit-learn and numpy):

    python scripts/convert_digits.py

Writes data/digits/images.npy (u8 [1797, 64], pixel values 0..16) and data/digits/labels.npy
(i64 [1797], classes 0..9). The demo splits them into train and test sets itself.
"""
import os

import numpy as np
from sklearn.datasets import load_digits


def main():
    digits = load_digits()
    images = digits.data.astype(np.uint8)
    labels = digits.target.astype(np.int64)
    assert images.shape == (1797, 64) and images.max() <= 16
    os.makedirs("data/digits", exist_ok=True)
    np.save("data/digits/images.npy", images)
    np.save("data/digits/labels.npy", labels)
    print(f"wrote {images.shape} images and {labels.shape} labels to data/digits/")


if __name__ == "__main__":
    main()
