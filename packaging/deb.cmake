# The Debian package: `cpack -G DEB` in a build tree (scripts/package.sh uses the `package`
# preset: CPU engine and the app, no tests) makes dpviz_<version>_amd64.deb from the install
# rules: dpviz, dpv, the lessons, the desktop entry, the AppStream metadata and the icon.
# dpkg-shlibdeps finds the libraries' packages; the plugins Qt loads at run time are not linked,
# so they are named here: the windowing plugins (xcb, wayland) and a font to draw text with.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dpviz)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "dpviz")
set(CPACK_PACKAGE_CONTACT "dpviz developers <dpviz@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "learn data-parallel training by running it")
set(CPACK_PACKAGE_DESCRIPTION
    "dpviz runs PyTorch-style data-parallel training for real, on devices simulated on the CPU,\n\
and shows every stage of an iteration of nn.DataParallel and DistributedDataParallel:\n\
scatter, replicate, parallel forward, gather, loss, backward, gradient reduce and optimizer\n\
step, with BatchNorm against SyncBatchNorm, measured timelines and practice questions.\n\
The command-line tool dpv runs the same engine.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/dpviz/dpviz")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "qt6-qpa-plugins, fonts-dejavu-core")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
