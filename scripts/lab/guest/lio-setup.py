#!/usr/bin/python3
"""LIO iSER target through rtslib-fb in one process (targetcli needs a system D-Bus and takes
about 15 s under TCG). A 64 MiB ramdisk LUN, portal IP:PORT with iSER on, demo mode.
usage: lio-setup.py IQN IP [PORT]"""
import sys
from rtslib_fb import RDMCPStorageObject, FabricModule, Target, TPG, NetworkPortal, LUN

iqn, ip = sys.argv[1], sys.argv[2]
port = int(sys.argv[3]) if len(sys.argv) > 3 else 3260
so = RDMCPStorageObject('rd0', size=64 * 1024 * 1024)
tpg = TPG(Target(FabricModule('iscsi'), iqn), 1)
np = NetworkPortal(tpg, ip, port)
np.iser = True
LUN(tpg, 0, so)
for k, v in (('authentication', '0'), ('demo_mode_write_protect', '0'),
             ('generate_node_acls', '1'), ('cache_dynamic_acls', '1')):
    tpg.set_attribute(k, v)
tpg.enable = True
print("target %s portal %s:%d iser=%s enabled=%s" % (iqn, ip, port, np.iser, tpg.enable))
