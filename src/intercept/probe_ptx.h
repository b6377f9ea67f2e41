// The SM probe as PTX, for the driver API: each block's thread 0 sets the bit of its %smid in a
// 256-bit mask, then every block stays resident for `spin` clock cycles so the blocks spread over
// every SM the stream may use. PTX 7.0 / sm_75 so that any driver since CUDA 11 compiles it.
#pragma once

namespace concord::intercept {

inline constexpr const char* kSmProbeKernel = "concord_smid_probe";
inline constexpr const char kSmProbePtx[] = R"ptx(
.version 7.0
.target sm_75
.address_size 64

.visible .entry concord_smid_probe(
	.param .u64 seen_param,
	.param .u64 spin_param
)
{
	.reg .pred 	%p<5>;
	.reg .b32 	%r<9>;
	.reg .b64 	%rd<9>;

	ld.param.u64 	%rd2, [seen_param];
	ld.param.u64 	%rd3, [spin_param];
	mov.u32 	%r2, %smid;
	mov.u32 	%r3, %tid.x;
	setp.ne.s32 	%p1, %r3, 0;
	setp.gt.u32 	%p2, %r2, 255;
	or.pred  	%p3, %p1, %p2;
	@%p3 bra 	SPIN;
	cvta.to.global.u64 	%rd4, %rd2;
	shr.u32 	%r4, %r2, 5;
	mul.wide.u32 	%rd5, %r4, 4;
	add.s64 	%rd6, %rd4, %rd5;
	and.b32  	%r5, %r2, 31;
	mov.u32 	%r6, 1;
	shl.b32 	%r7, %r6, %r5;
	atom.global.or.b32 	%r8, [%rd6], %r7;
SPIN:
	mov.u64 	%rd7, %clock64;
	add.s64 	%rd1, %rd7, %rd3;
WAIT:
	mov.u64 	%rd8, %clock64;
	setp.lt.s64 	%p4, %rd8, %rd1;
	@%p4 bra 	WAIT;
	ret;
}
)ptx";

}  // namespace concord::intercept
