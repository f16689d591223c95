# Adds cgwarden.cfg (the kernel options cgwarden's policy features need) to
# linux-yocto kernels. For a vendor kernel recipe, copy this file under that
# recipe's name; kernels that do not use the kernel-yocto fragment mechanism
# need the options merged into their defconfig instead.
FILESEXTRAPATHS:prepend := "${THISDIR}:"
SRC_URI += "file://cgwarden.cfg"
