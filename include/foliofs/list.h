/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * foliofs/list.h - an intrusive doubly linked list, for every list of the
 * tree whose members come and go from the middle: blockstate's LRU lists
 * and file list, writeback's file and dirty lists, fusefs's idle data
 * descriptors, cache of O_PATH descriptors and open handles.  A leaf: it
 * includes nothing of the tree, and any layer may use it.  The tree's
 * own, not installed (only policy.h is).
 *
 * A list is a head, a struct list_node that is no member, linked in a
 * circle with the members:
 *
 *	head <-> first <-> ... <-> last <-> head
 *
 * A member embeds a struct list_node and is found from it with
 * list_entry().  A node on no list has next == NULL, so a zeroed member
 * is on none (list_linked); a head is made with list_init() and is empty
 * when it points at itself.  Nothing here locks: each list says at its
 * head which lock protects it.
 */
#ifndef FOLIOFS_LIST_H
#define FOLIOFS_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list_node {
	struct list_node *next;
	struct list_node *prev;
};

/* The member of type @type whose field @member is @node. */
#define list_entry(node, type, member) \
	((type *)((char *)(node) - offsetof(type, member)))

/* An empty list at @head. */
static inline void list_init(struct list_node *head)
{
	head->next = head->prev = head;
}

static inline bool list_is_empty(const struct list_node *head)
{
	return head->next == head;
}

/* Whether the member's @node is on a list. */
static inline bool list_linked(const struct list_node *node)
{
	return node->next != NULL;
}

/* Put @node, on no list, between @prev and @next. */
static inline void list_insert_between(struct list_node *node, struct list_node *prev,
				 struct list_node *next)
{
	node->prev = prev;
	node->next = next;
	prev->next = node;
	next->prev = node;
}

/* @node (on no list) becomes the first of @head. */
static inline void list_push_front(struct list_node *head, struct list_node *node)
{
	list_insert_between(node, head, head->next);
}

/* @node (on no list) becomes the last of @head. */
static inline void list_push_back(struct list_node *head, struct list_node *node)
{
	list_insert_between(node, head->prev, head);
}

/* Take @node off its list; it is then on none. */
static inline void list_unlink(struct list_node *node)
{
	node->prev->next = node->next;
	node->next->prev = node->prev;
	node->next = node->prev = NULL;
}

/* The first and the last node of @head: NULL when it is empty. */
static inline struct list_node *list_first(const struct list_node *head)
{
	return list_is_empty(head) ? NULL : head->next;
}

static inline struct list_node *list_last(const struct list_node *head)
{
	return list_is_empty(head) ? NULL : head->prev;
}

/* The node after and before @node on @head: NULL past either end. */
static inline struct list_node *list_next(const struct list_node *head,
					  const struct list_node *node)
{
	return node->next == head ? NULL : node->next;
}

static inline struct list_node *list_prev(const struct list_node *head,
					  const struct list_node *node)
{
	return node->prev == head ? NULL : node->prev;
}

/*
 * @pos (a pointer to the members' type) over the members of @head from
 * the first, linked through their field @member.  The body must not take
 * @pos off the list.
 */
#define list_for_each_entry(pos, head, member)					\
	for (struct list_node *list_it_ = (head)->next;				\
	     list_it_ != (head) &&						\
	     ((pos) = list_entry(list_it_, __typeof__(*(pos)), member), true);	\
	     list_it_ = list_it_->next)

#endif /* FOLIOFS_LIST_H */
