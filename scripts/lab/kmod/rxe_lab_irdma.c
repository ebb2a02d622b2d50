// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * iser-guard lab only: Soft-RoCE whose QP 1 fails the way irdma's does.
 *
 * Compiled into rdma_rxe from Debian's own rxe sources (build.sh), with small
 * hooks (hooks-<kernel>.patch) calling the three functions below. Devices not
 * named in the irdma_gsi_devs parameter, and every QP other than QP 1, behave
 * exactly as stock rxe. README.md says what is modelled and cites the lines.
 */
#include <linux/ctype.h>
#include <linux/module.h>
#include <linux/etherdevice.h>
#include <net/arp.h>
#include <net/neighbour.h>
#include <net/route.h>

#include "rxe.h"
#include "rxe_lab_irdma.h"

static char *irdma_gsi_devs = "";
module_param(irdma_gsi_devs, charp, 0644);
MODULE_PARM_DESC(irdma_gsi_devs,
		 "comma-separated RDMA device names whose QP 1 behaves like irdma's (lab only)");

/* A device is modelled when its name is one of the comma-separated names. */
static bool modelled(struct rxe_qp *qp)
{
	const char *name = dev_name(&qp->ibqp.device->dev);
	const char *list = READ_ONCE(irdma_gsi_devs);
	size_t len = strlen(name);

	if (qp_type(qp) != IB_QPT_GSI || !list || !*list || !len)
		return false;
	while (*list) {
		const char *end = strchrnul(list, ',');
		size_t n = end - list;

		/* a value written with echo ends in a newline */
		while (n && isspace(list[n - 1]))
			n--;
		if (n == len && !strncmp(list, name, len))
			return true;
		list = *end ? end + 1 : end;
	}
	return false;
}

bool rxe_lab_gsi_modify_refused(struct rxe_qp *qp, struct ib_qp_attr *attr,
				int mask)
{
	/* irdma keeps its own ibqp_state and never reads attr->cur_qp_state. */
	enum ib_qp_state cached = qp->attr.qp_state;

	if (!(mask & IB_QP_STATE) || !modelled(qp))
		return false;
	if (!ib_modify_qp_is_ok(cached, attr->qp_state, IB_QPT_GSI, mask)) {
		/* irdma verbs.c irdma_modify_qp_roce(), the same format */
		ibdev_warn(qp->ibqp.device,
			   "modify_qp invalid for qp_id=%d, old_state=0x%x, new_state=0x%x\n",
			   qp->ibqp.qp_num, cached, attr->qp_state);
		return true;
	}
	/* irdma's IB_QPS_RTS case: refused silently below RTR or from ERR */
	if (attr->qp_state == IB_QPS_RTS &&
	    (cached < IB_QPS_RTR || cached == IB_QPS_ERR))
		return true;
	return false;
}

bool rxe_lab_gsi_unreachable(struct rxe_qp *qp, struct rxe_av *av,
			     struct net_device *ndev)
{
	struct flowi4 fl = {};
	struct neighbour *n;
	struct rtable *rt;
	__be32 daddr, nexthop;
	u8 state;

	if (!modelled(qp) || av->network_type != RXE_NETWORK_TYPE_IPV4)
		return false;
	/* a send to this port itself never leaves it: rxe loops it back (the
	 * same test as rxe_prepare's RXE_LOOPBACK_MASK), no neighbour is involved */
	if (ether_addr_equal(ndev->dev_addr, av->dmac))
		return false;
	daddr = av->dgid_addr._sockaddr_in.sin_addr.s_addr;

	fl.flowi4_oif = ndev->ifindex;
	fl.saddr = av->sgid_addr._sockaddr_in.sin_addr.s_addr;
	fl.daddr = daddr;
	fl.flowi4_proto = IPPROTO_UDP;
	rt = ip_route_output_key(&init_net, &fl);
	if (IS_ERR(rt))
		return false; /* rxe's own path reports a missing route */
	nexthop = rt_nexthop(rt, daddr);
	n = neigh_lookup(&arp_tbl, &nexthop, rt->dst.dev);
	ip_rt_put(rt);
	if (!n)
		return false;
	state = READ_ONCE(n->nud_state);
	neigh_release(n);
	/* irdma utils.c irdma_net_event(): NETEVENT_NEIGH_UPDATE without
	 * NUD_VALID deletes the hardware ARP entry the send would use */
	if (state & NUD_VALID)
		return false;
	pr_debug("lab irdma model: %s qp#1 send to %pI4: neighbour state 0x%x, failing the send\n",
		 dev_name(&qp->ibqp.device->dev), &daddr, state);
	return true;
}

enum ib_wc_status rxe_lab_flush_status(struct rxe_qp *qp)
{
	return modelled(qp) ? IB_WC_GENERAL_ERR : IB_WC_WR_FLUSH_ERR;
}
