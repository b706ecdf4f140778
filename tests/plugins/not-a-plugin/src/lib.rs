//! A valid shared library that is not a thunder plugin: the host must skip it quietly.

#[no_mangle]
pub extern "C" fn something_else() -> u32 {
    7
}
