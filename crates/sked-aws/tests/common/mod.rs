//! The moto fixture lives in `sked_aws::testing` (feature `testing`), shared with the Lambda
//! functions' tests.

#![allow(unused_imports)] // each test binary uses part of it

pub use sked_aws::testing::*;
