//! Tests drive the executor through its trait methods on hand-built trace views. Buffers are
//! encoded and decoded here with std and `half` directly, independent of the crate's own
//! memory code, and expected values are computed by hand or with std's f32/f64 arithmetic.

mod compare;
mod convert;
mod elementwise;
mod indexing;
mod kernels;
mod program;
mod reduce;
mod shape;

use crate::Interpreter;
use half::{bf16, f16};
use std::ffi::c_void;
use thunder_abi::abi_stable::std_types::{RSlice, RVec};
use thunder_abi::export::{CompiledRegion, Executor};
use thunder_abi::{
    ArgView, DTypeCode, DeviceDesc, ExecContext, OpView, PluginError, RegionSpec, TensorDesc,
    TraceView, ValueMeta,
};

pub(crate) use DTypeCode::{Bool as B8, BF16, F16, F32, F64, I16, I32, I64, I8, U8};

/// A host-side tensor: raw bytes plus the descriptor fields that point into them.
#[derive(Debug, Clone)]
pub(crate) struct Buf {
    pub dtype: DTypeCode,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    pub byte_offset: u64,
    pub bytes: Vec<u8>,
}

fn row_major(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

impl Buf {
    /// A contiguous tensor from values given as f64 (every test value is exact in its dtype).
    pub fn new(dtype: DTypeCode, shape: &[i64], values: &[f64]) -> Buf {
        let mut bytes = Vec::new();
        for &v in values {
            match dtype {
                B8 => bytes.push(u8::from(v != 0.0)),
                U8 => bytes.push(v as u8),
                I8 => bytes.extend((v as i8).to_ne_bytes()),
                I16 => bytes.extend((v as i16).to_ne_bytes()),
                I32 => bytes.extend((v as i32).to_ne_bytes()),
                I64 => bytes.extend((v as i64).to_ne_bytes()),
                F16 => bytes.extend(f16::from_f32(v as f32).to_bits().to_ne_bytes()),
                BF16 => bytes.extend(bf16::from_f32(v as f32).to_bits().to_ne_bytes()),
                F32 => bytes.extend((v as f32).to_ne_bytes()),
                F64 => bytes.extend(v.to_ne_bytes()),
            }
        }
        let buf = Buf {
            dtype,
            shape: shape.to_vec(),
            strides: row_major(shape),
            byte_offset: 0,
            bytes,
        };
        assert_eq!(
            buf.bytes.len(),
            buf.numel() * dtype.size_bytes(),
            "test buffer of the wrong size"
        );
        buf
    }

    /// An i64 tensor, for values beyond f64's exact range.
    pub fn i64s_of(shape: &[i64], values: &[i64]) -> Buf {
        let bytes = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        Buf {
            dtype: I64,
            shape: shape.to_vec(),
            strides: row_major(shape),
            byte_offset: 0,
            bytes,
        }
    }

    pub fn zeros(dtype: DTypeCode, shape: &[i64]) -> Buf {
        let n: i64 = shape.iter().product();
        Buf::new(dtype, shape, &vec![0.0; n as usize])
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product::<i64>() as usize
    }

    pub fn desc(&self) -> TensorDesc<'_> {
        // An empty buffer is handed over as a null pointer, as a host may do for numel 0.
        let data = if self.bytes.is_empty() {
            std::ptr::null_mut()
        } else {
            self.bytes.as_ptr() as *mut c_void
        };
        TensorDesc {
            data,
            byte_offset: self.byte_offset,
            device: DeviceDesc::CPU,
            dtype: self.dtype,
            shape: RSlice::from_slice(&self.shape),
            strides: RSlice::from_slice(&self.strides),
        }
    }

    /// A descriptor the callee may write through.
    pub fn desc_mut(&mut self) -> TensorDesc<'_> {
        let data = self.bytes.as_mut_ptr() as *mut c_void;
        let mut desc = self.desc();
        if !desc.data.is_null() {
            desc.data = data;
        }
        desc
    }

    fn element(&self, i: usize) -> &[u8] {
        let size = self.dtype.size_bytes();
        &self.bytes[i * size..(i + 1) * size]
    }

    /// Values of a contiguous buffer as f64.
    pub fn f64s(&self) -> Vec<f64> {
        (0..self.numel())
            .map(|i| {
                let e = self.element(i);
                match self.dtype {
                    B8 | U8 => f64::from(e[0]),
                    I8 => f64::from(e[0] as i8),
                    I16 => f64::from(i16::from_ne_bytes([e[0], e[1]])),
                    I32 => f64::from(i32::from_ne_bytes([e[0], e[1], e[2], e[3]])),
                    I64 => i64::from_ne_bytes(e.try_into().expect("8 bytes")) as f64,
                    F16 => f16::from_bits(u16::from_ne_bytes([e[0], e[1]])).to_f64(),
                    BF16 => bf16::from_bits(u16::from_ne_bytes([e[0], e[1]])).to_f64(),
                    F32 => f64::from(f32::from_ne_bytes([e[0], e[1], e[2], e[3]])),
                    F64 => f64::from_ne_bytes(e.try_into().expect("8 bytes")),
                }
            })
            .collect()
    }

    pub fn i64s(&self) -> Vec<i64> {
        if self.dtype == I64 {
            return (0..self.numel())
                .map(|i| i64::from_ne_bytes(self.element(i).try_into().expect("8")))
                .collect();
        }
        self.f64s().into_iter().map(|v| v as i64).collect()
    }

    pub fn bools(&self) -> Vec<bool> {
        assert_eq!(self.dtype, B8);
        self.bytes.iter().map(|&b| b != 0).collect()
    }
}

/// A trace under construction; its ops form the region under test.
#[derive(Debug, Clone)]
pub(crate) struct Trace {
    pub view: TraceView,
}

pub(crate) fn val(id: u32) -> ArgView {
    ArgView::Value(id)
}

pub(crate) fn ints(v: &[i64]) -> ArgView {
    ArgView::Ints(RVec::from(v.to_vec()))
}

impl Trace {
    pub fn new() -> Trace {
        Trace {
            view: TraceView {
                values: RVec::new(),
                ops: RVec::new(),
                inputs: RVec::new(),
                outputs: RVec::new(),
            },
        }
    }

    fn value(&mut self, dtype: DTypeCode, shape: &[i64], device: DeviceDesc) -> u32 {
        self.view.values.push(ValueMeta {
            shape: shape.to_vec().into(),
            dtype,
            device,
            requires_grad: false,
        });
        (self.view.values.len() - 1) as u32
    }

    pub fn input(&mut self, dtype: DTypeCode, shape: &[i64]) -> u32 {
        let id = self.value(dtype, shape, DeviceDesc::CPU);
        self.view.inputs.push(id);
        id
    }

    pub fn op_on(
        &mut self,
        symbol: &str,
        args: Vec<ArgView>,
        dtype: DTypeCode,
        shape: &[i64],
        device: DeviceDesc,
    ) -> u32 {
        let out = self.value(dtype, shape, device);
        self.view.ops.push(OpView {
            symbol: symbol.into(),
            args: args.into(),
            outputs: vec![out].into(),
            claimed: false,
            composite: !symbol.starts_with("prims."),
        });
        out
    }

    /// Appends `symbol(args)` with an output of `dtype[shape]` on the CPU; returns the output id.
    pub fn op(&mut self, symbol: &str, args: Vec<ArgView>, dtype: DTypeCode, shape: &[i64]) -> u32 {
        self.op_on(symbol, args, dtype, shape, DeviceDesc::CPU)
    }

    /// Compiles every op as one region reading the trace inputs and writing `outputs`.
    pub fn compile(&self, outputs: &[u32]) -> Result<Box<dyn CompiledRegion>, PluginError> {
        let region = RegionSpec {
            ops: (0..self.view.ops.len() as u32).collect(),
            inputs: self.view.inputs.clone(),
            outputs: outputs.to_vec().into(),
        };
        Interpreter.compile(&self.view, &region)
    }

    /// Compiles and runs, returning freshly allocated contiguous outputs.
    pub fn run(&self, inputs: &[&Buf], outputs: &[u32]) -> Result<Vec<Buf>, PluginError> {
        let compiled = self.compile(outputs)?;
        let mut outs: Vec<Buf> = outputs
            .iter()
            .map(|&id| {
                let meta = &self.view.values[id as usize];
                Buf::zeros(meta.dtype, &meta.shape)
            })
            .collect();
        let in_descs: Vec<TensorDesc<'_>> = inputs.iter().map(|b| b.desc()).collect();
        let out_descs: Vec<TensorDesc<'_>> = outs.iter_mut().map(Buf::desc_mut).collect();
        compiled.run(&in_descs, &out_descs, &ExecContext::CPU)?;
        drop(out_descs);
        Ok(outs)
    }

    /// Runs a trace with one output and returns it.
    pub fn run1(&self, inputs: &[&Buf]) -> Result<Buf, PluginError> {
        let out = (self.view.values.len() - 1) as u32;
        let mut outs = self.run(inputs, &[out])?;
        Ok(outs.remove(0))
    }
}

/// One op on fresh inputs: builds the trace, runs it, and returns the single output.
pub(crate) fn eval(
    symbol: &str,
    inputs: &[&Buf],
    args: impl FnOnce(&[u32]) -> Vec<ArgView>,
    dtype: DTypeCode,
    shape: &[i64],
) -> Result<Buf, PluginError> {
    let mut t = Trace::new();
    let ids: Vec<u32> = inputs.iter().map(|b| t.input(b.dtype, &b.shape)).collect();
    t.op(symbol, args(&ids), dtype, shape);
    t.run1(inputs)
}

/// Asserts equality of float results, treating NaN as equal to NaN.
#[track_caller]
pub(crate) fn assert_floats(got: &[f64], want: &[f64]) {
    let same = got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| (g.is_nan() && w.is_nan()) || g == w);
    assert!(same, "got {got:?}, want {want:?}");
}

#[track_caller]
pub(crate) fn assert_err(
    result: Result<Buf, PluginError>,
    kind: thunder_abi::PluginErrorKind,
    needles: &[&str],
) {
    match result {
        Ok(buf) => panic!("expected an error, got {:?}", buf.f64s()),
        Err(e) => {
            assert_eq!(e.kind, kind, "{e}");
            for needle in needles {
                assert!(
                    e.message.contains(needle),
                    "`{}` does not mention `{needle}`",
                    e.message
                );
            }
        }
    }
}
