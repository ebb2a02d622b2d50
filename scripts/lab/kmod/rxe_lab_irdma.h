/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * iser-guard lab only: Soft-RoCE whose QP 1 fails the way irdma's does.
 * See README.md beside this file for what is modelled, from which kernel
 * lines, and where it differs.
 */
#ifndef RXE_LAB_IRDMA_H
#define RXE_LAB_IRDMA_H

#include <rdma/ib_verbs.h>

struct rxe_qp;
struct rxe_av;
struct net_device;

/* (a) irdma_modify_qp_roce(): QP 1's state change is checked against the
 * driver's cached state, IB_QP_CUR_STATE is ignored. True: refused (-EINVAL). */
bool rxe_lab_gsi_modify_refused(struct rxe_qp *qp, struct ib_qp_attr *attr,
				int mask);

/* (b) a QP 1 send whose destination has no valid neighbour entry (irdma
 * deletes its hardware ARP entry then) fails: the caller errors the WQE. */
bool rxe_lab_gsi_unreachable(struct rxe_qp *qp, struct rxe_av *av,
			     struct net_device *ndev);

/* (b) the completion status of a send WQE flushed from a QP in ERR: QP 1 of
 * a modelled device completes with a non-flush error, like irdma's hardware
 * does for WQEs it processes on a QP it put in error. */
enum ib_wc_status rxe_lab_flush_status(struct rxe_qp *qp);

#endif
