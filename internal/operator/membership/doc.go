// Package membership decides the raft group's next membership step for a
// Worker: Decide is a pure function from what the operator sees (the spec,
// the previous status, the StatefulSet's pod count and each pod's
// GET /admin/cluster) to one step, which the reconciler performs before
// looking again. It adds each new pod as a learner, promotes it once caught
// up until spec.voters vote, removes the members on the highest ordinals on
// a scale-down (moving leadership off them first; with
// spec.replicationFactor demoting them first and waiting until their pods
// hold partition 0 alone, their replicas moved off by the workers) before
// the StatefulSet shrinks, demotes voters when spec.voters is lowered, never below a
// quorum, and removes the old ID of a pod whose volume was wiped (it came
// back under a new ID, or under its old one and refused by the group). Beside the step it names the volumes to delete: those of pods a
// scale-down removed once the StatefulSet no longer runs them, and those of
// pods the spec wants again while their volume still holds a member the
// group removed (Decision.Recycle: the pod is started again empty).
//
// Nothing is remembered between reconciles except what Decide put into the
// Worker's status, so an operator restarted in the middle of a change
// recomputes the same step from the same world.
package membership
