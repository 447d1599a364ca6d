/* list.h - the intrusive doubly linked list every module keeps its live
 * objects on (connections, calls, watched sockets, streams).
 *
 * A node is any struct with `prev` and `next` pointers to its own type; a
 * list is a pointer to its first node (NULL when empty). New nodes go to
 * the front, so adding and unlinking are O(1) and nothing is allocated.
 * Macros rather than functions so the node keeps its own type (no
 * container_of casts at every use). Locking is the owner's. Unlinking
 * leaves the node's own pointers as they were, so a walk that saved
 * `next` first may unlink the node it stands on.
 */
#ifndef TILE_LIST_H
#define TILE_LIST_H

#include <stddef.h>

/* Puts `node` at the front of the list `head` (an lvalue). */
#define TILE_LIST_PUSH(head, node)                                                                                     \
    do {                                                                                                               \
        (node)->prev = NULL;                                                                                           \
        (node)->next = (head);                                                                                         \
        if (head)                                                                                                      \
            (head)->prev = (node);                                                                                     \
        (head) = (node);                                                                                               \
    } while (0)

/* Takes `node` out of the list `head` (an lvalue) it is on. */
#define TILE_LIST_UNLINK(head, node)                                                                                   \
    do {                                                                                                               \
        if ((node)->prev)                                                                                              \
            (node)->prev->next = (node)->next;                                                                         \
        else                                                                                                           \
            (head) = (node)->next;                                                                                     \
        if ((node)->next)                                                                                              \
            (node)->next->prev = (node)->prev;                                                                         \
    } while (0)

#endif
